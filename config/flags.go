package config

import (
	"flag"
	"fmt"
)

// Flags are the command-line flags shared by the chat and other commands.
// RegisterFlags adds them to a FlagSet; after Parse, pass the Flags to Load
// (LoadOptions.Flags) so that they win over the file and environment.
type Flags struct {
	set []*flagValue
	// Continue (-c, --continue) resumes the last session.
	Continue bool
	// Session (--session ID) resumes the given session; 0 means none.
	Session int64
	// ConfigPath (--config FILE) reads this file instead of the default.
	ConfigPath string
}

// RegisterFlags adds --model, --backend, --adapter, --threads, --ctx,
// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --seed, --think,
// --system, -c/--continue, --session and --config to fs. Go's flag package
// accepts each with one dash or two.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	f := RegisterSettings(fs)
	fs.BoolVar(&f.Continue, "c", false, "continue the last session")
	fs.BoolVar(&f.Continue, "continue", false, "continue the last session")
	fs.Int64Var(&f.Session, "session", 0, "resume session `ID`")
	return f
}

// RegisterSettings adds the flags of the named settings (by flag name:
// "model", "ctx", "seed"; none named means every one) and --config to fs,
// for a command that reads the same configuration as the chat but has no
// use for some of its flags (`bonsai bench` has no --system). A name that
// is not a setting's flag panics: it is a programming error.
func RegisterSettings(fs *flag.FlagSet, names ...string) *Flags {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	f := &Flags{}
	for _, s := range settings {
		if s.flag == "" || (len(names) > 0 && !want[s.flag]) {
			continue
		}
		delete(want, s.flag)
		v := &flagValue{setting: s}
		f.set = append(f.set, v)
		fs.Var(v, s.flag, s.usage)
	}
	for n := range want {
		panic(fmt.Sprintf("config: no setting has the flag --%s", n))
	}
	fs.StringVar(&f.ConfigPath, "config", "", "read configuration from `file`")
	return f
}

// apply overlays the flags given on the command line.
func (f *Flags) apply(c *Config) error {
	for _, v := range f.set {
		if !v.given {
			continue
		}
		if err := v.setting.set(c, v.text); err != nil {
			return flagError{fmt.Errorf("--%s %q: %w: %w", v.setting.flag, v.text, ErrInvalid, err)}
		}
		c.Sources[v.setting.key] = Source{Origin: FromFlag, Name: "--" + v.setting.flag}
	}
	return nil
}

// flagValue records a flag's text; Load parses it in order with the other
// sources, so flag.FlagSet's defaults never mask the file or environment.
type flagValue struct {
	setting setting
	text    string
	given   bool
}

func (v *flagValue) String() string {
	if v == nil || !v.given {
		return ""
	}
	return v.text
}

func (v *flagValue) Set(text string) error {
	// Reject bad values at parse time, so the error comes with the usage.
	var scratch Config
	if err := v.setting.set(&scratch, text); err != nil {
		return err
	}
	v.text, v.given = text, true
	return nil
}

// IsBoolFlag lets --think stand alone (and --think=false turn it off).
func (v *flagValue) IsBoolFlag() bool { return v.setting.isBool() }
