// Package session keeps conversations in a SQLite database (pure Go,
// modernc.org/sqlite): sessions, their messages with per-turn statistics, and a
// full-text index over everything said.
//
// The database lives at DefaultPath ($XDG_DATA_HOME/bonsai/bonsai.db). It runs
// in WAL mode with a busy timeout, so several bonsai processes can share it;
// every message is written as it completes, and a streaming reply is flushed
// about once a second (BeginReply), so a crash loses at most the last second.
//
// Open refuses a file that is not a bonsai database (ErrNotDatabase,
// ErrForeignDatabase) before SQLite may write to it, and leaves it untouched.
package session

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/adrg/xdg"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Errors callers branch on. Errors from Store methods wrap one of these when
// the cause is known, together with the underlying error.
var (
	// ErrNotDatabase: the file at the database path is not a SQLite database,
	// or it is corrupt.
	ErrNotDatabase = errors.New("not a bonsai database (not SQLite, or corrupt)")
	// ErrForeignDatabase: a SQLite database that belongs to another program.
	ErrForeignDatabase = errors.New("a SQLite database that bonsai did not create")
	// ErrTooNew: the database was written by a newer bonsai with a schema this
	// build does not know.
	ErrTooNew = errors.New("database schema is newer than this bonsai")
	// ErrLocked: another process held the database longer than the busy
	// timeout.
	ErrLocked = errors.New("database is locked by another process")
	// ErrDiskFull: the disk (or the database's size limit) is full.
	ErrDiskFull = errors.New("disk full")
	// ErrNotFound: no such session.
	ErrNotFound = errors.New("no such session")
	// ErrReadOnly: the user's data directory cannot be written.
	ErrReadOnly = errors.New("the data directory is not writable")
	// ErrChanged: another process changed the session underneath this one
	// (added messages to it, or removed some this one holds).
	ErrChanged = errors.New("the session was changed by another process")
	// ErrClosed: the Store or ReplyWriter was already closed.
	ErrClosed = errors.New("closed")
	// ErrNeedsUpgrade: OpenReadOnly found a database written by an older
	// bonsai, whose schema only a writable Open brings up to date.
	ErrNeedsUpgrade = errors.New("the database was written by an older bonsai and needs upgrading: open it once with write access (run bonsai as usual)")
)

// applicationID marks bonsai's databases in the SQLite header ("BnsI"), so a
// foreign SQLite file is recognised before anything is written to it.
const applicationID = 0x426e7349

// DefaultPath is where conversations are kept: $XDG_DATA_HOME/bonsai/bonsai.db
// (~/.local/share on Linux). It creates the directory. When that directory
// cannot be created or written it fails with ErrReadOnly and the path: it
// never falls back to the system-wide XDG_DATA_DIRS (as xdg.DataFile
// does), where a chat saved would be one the next normal run cannot find.
func DefaultPath() (string, error) {
	dir := filepath.Join(xdg.DataHome, "bonsai")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("session database path: %s: %w: %w", dir, ErrReadOnly, err)
	}
	if err := writable(dir); err != nil {
		return "", fmt.Errorf("session database path: %s: %w: %w", dir, ErrReadOnly, err)
	}
	return filepath.Join(dir, "bonsai.db"), nil
}

// DataPath is where DefaultPath keeps the database, found without creating
// or checking anything: reading the conversations needs no write access.
func DataPath() string { return filepath.Join(xdg.DataHome, "bonsai", "bonsai.db") }

// Options tune a Store; the zero value gives the defaults.
type Options struct {
	// BusyTimeout is how long a writer waits for another process's
	// transaction before failing with ErrLocked. Default 5s.
	BusyTimeout time.Duration
	// FlushInterval is how often a streaming reply is written. Default 1s.
	FlushInterval time.Duration
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Store is an open conversation database. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
	opts Options

	mu      sync.Mutex
	writers map[*ReplyWriter]struct{} // replies still streaming, flushed by Close
}

// Open opens (creating if needed) the database at path with default Options.
func Open(path string) (*Store, error) { return OpenWith(path, Options{}) }

// OpenWith opens (creating if needed) the database at path and brings its
// schema up to date.
func OpenWith(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// SQLite's own message for a missing directory is a bare "unable to
	// open database file".
	if _, err := os.Stat(filepath.Dir(abs)); err != nil {
		return nil, fmt.Errorf("open %s: %w", abs, err)
	}
	if err := checkHeader(abs); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn(abs, opts.BusyTimeout))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", abs, err)
	}
	s := &Store{db: db, path: abs, opts: opts, writers: map[*ReplyWriter]struct{}{}}
	if err := s.migrate(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", abs, err)
	}
	return s, nil
}

// OpenReadOnly opens an existing database for reading only: it creates
// nothing (no database, no WAL files where SQLite can do without them),
// migrates nothing and needs no write access to the file or its directory,
// so listing and exporting work on a read-only data directory. A database
// whose schema is older than this build's fails with ErrNeedsUpgrade; a
// missing one with an error wrapping os.ErrNotExist.
func OpenReadOnly(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("open %s: %w", abs, err)
	}
	if err := checkHeader(abs); err != nil {
		return nil, err
	}
	// A WAL database opened read-only still needs its -shm file; where the
	// directory cannot be written and the file is not there, SQLite can only
	// read the database as immutable (with no writer able to exist beside
	// it, nothing is missed).
	immutable := writable(filepath.Dir(abs)) != nil && !exists(abs+"-shm")
	db, err := sql.Open("sqlite", readOnlyDSN(abs, opts.BusyTimeout, immutable))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", abs, err)
	}
	if err := checkSchema(context.Background(), db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", abs, err)
	}
	return &Store{db: db, path: abs, opts: opts, writers: map[*ReplyWriter]struct{}{}}, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// checkSchema fails unless the database's schema is exactly this build's.
func checkSchema(ctx context.Context, db *sql.DB) error {
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", classify(err))
	}
	switch {
	case version > SchemaVersion:
		return fmt.Errorf("%w: schema %d, this build knows up to %d", ErrTooNew, version, SchemaVersion)
	case version < SchemaVersion:
		return fmt.Errorf("schema %d, this build's is %d: %w", version, SchemaVersion, ErrNeedsUpgrade)
	}
	return nil
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database. Replies still streaming get a last flush of
// their text and stay marked interrupted (Finish them first to store them as
// complete); their writers are closed.
func (s *Store) Close() error {
	s.mu.Lock()
	open := make([]*ReplyWriter, 0, len(s.writers))
	for w := range s.writers {
		open = append(open, w)
	}
	s.mu.Unlock()
	var errs []error
	for _, w := range open {
		errs = append(errs, w.abandon())
	}
	return errors.Join(append(errs, s.db.Close())...)
}

// dsn builds a file: URI so that odd characters in the path survive. Every
// pooled connection gets the busy timeout and foreign keys (both are per
// connection); transactions begin IMMEDIATE so two writers queue on the busy
// timeout instead of failing on a read-to-write lock upgrade.
func dsn(abs string, busy time.Duration) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	if u.Path[0] != '/' { // Windows drive letters
		u.Path = "/" + u.Path
	}
	return u.String()
}

// readOnlyDSN is dsn for a reader: mode=ro, and immutable=1 where the
// database's directory cannot hold the WAL index.
func readOnlyDSN(abs string, busy time.Duration, immutable bool) string {
	u, _ := url.Parse(dsn(abs, busy))
	q := u.Query()
	q.Set("mode", "ro")
	if immutable {
		q.Set("immutable", "1")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// sqliteMagic starts every SQLite 3 database file.
const sqliteMagic = "SQLite format 3\x00"

// checkHeader reads the file at path, if any, without SQLite, and decides
// whether SQLite may open it read-write. A missing or empty file becomes a
// new database.
func checkHeader(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	if st.IsDir() {
		return fmt.Errorf("open %s: is a directory: %w", path, ErrNotDatabase)
	}
	if st.Size() == 0 {
		return nil
	}
	var header [100]byte
	if _, err := io.ReadFull(f, header[:]); err != nil {
		return fmt.Errorf("open %s: file too short for a database header: %w", path, ErrNotDatabase)
	}
	if string(header[:16]) != sqliteMagic {
		return fmt.Errorf("open %s: no SQLite header: %w", path, ErrNotDatabase)
	}
	if id := binary.BigEndian.Uint32(header[68:72]); id != applicationID {
		return fmt.Errorf("open %s: application id %#x, bonsai's is %#x: %w", path, id, applicationID, ErrForeignDatabase)
	}
	return nil
}

// classify wraps SQLite failures in the sentinel a caller can act on.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("%w: %w", ErrLocked, err)
	case sqlite3.SQLITE_FULL:
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return fmt.Errorf("%w: %w", ErrNotDatabase, err)
	}
	return err
}

// millis is how times are stored: Unix milliseconds.
func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms) }

// withTx runs fn in one transaction (BEGIN IMMEDIATE), committing if it
// returns nil.
func (s *Store) withTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return classify(err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return classify(err)
	}
	return classify(tx.Commit())
}
