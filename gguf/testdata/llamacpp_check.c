// llamacpp_check: cross-checks bonsai's gguf package against llama.cpp's
// own GGUF code (libggml-base). Not built by Go; regenerate the goldens with
//
//   L=tools/oracle/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
//   gcc -O1 -I<llama.cpp>/ggml/include -o /tmp/llamacpp_check gguf/testdata/llamacpp_check.c -L$L -lggml-base -Wl,-rpath,$L
//   /tmp/llamacpp_check write gguf/testdata/llamacpp-written.gguf
//   /tmp/llamacpp_check dump  gguf/testdata/llamacpp-written.gguf > gguf/testdata/llamacpp-written.dump
//   go test ./gguf -run TestLlamaCppGolden -write-bonsai /tmp/bonsai-written.gguf
//   /tmp/llamacpp_check dump  /tmp/bonsai-written.gguf > gguf/testdata/bonsai-written.dump
//
// "write" builds a file with llama.cpp's writer: every scalar and array
// type and tensors of several types. "dump" prints what llama.cpp's reader
// sees, one fact per line, in a form the Go test prints too.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "gguf.h"

static void put_str(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p > 0x20 && *p < 0x7f && *p != '\\') putchar(*p);
        else printf("\\x%02x", *p);
    }
}

static void put_elem(enum gguf_type t, const void *data, size_t i) {
    switch (t) {
    case GGUF_TYPE_UINT8:   printf(" %u", ((const uint8_t *)data)[i]); break;
    case GGUF_TYPE_INT8:    printf(" %d", ((const int8_t *)data)[i]); break;
    case GGUF_TYPE_UINT16:  printf(" %u", ((const uint16_t *)data)[i]); break;
    case GGUF_TYPE_INT16:   printf(" %d", ((const int16_t *)data)[i]); break;
    case GGUF_TYPE_UINT32:  printf(" %" PRIu32, ((const uint32_t *)data)[i]); break;
    case GGUF_TYPE_INT32:   printf(" %" PRId32, ((const int32_t *)data)[i]); break;
    case GGUF_TYPE_UINT64:  printf(" %" PRIu64, ((const uint64_t *)data)[i]); break;
    case GGUF_TYPE_INT64:   printf(" %" PRId64, ((const int64_t *)data)[i]); break;
    case GGUF_TYPE_FLOAT32: { uint32_t b; memcpy(&b, (const float *)data + i, 4); printf(" f32:%08" PRIx32, b); } break;
    case GGUF_TYPE_FLOAT64: { uint64_t b; memcpy(&b, (const double *)data + i, 8); printf(" f64:%016" PRIx64, b); } break;
    case GGUF_TYPE_BOOL:    printf(" %s", ((const int8_t *)data)[i] ? "true" : "false"); break;
    default: printf(" ?"); break;
    }
}

static int dump(const char *path) {
    struct gguf_init_params params = { .no_alloc = true, .ctx = NULL };
    struct gguf_context *ctx = gguf_init_from_file(path, params);
    if (!ctx) { fprintf(stderr, "llama.cpp refused %s\n", path); return 1; }
    printf("version %" PRIu32 "\n", gguf_get_version(ctx));
    printf("alignment %zu\n", gguf_get_alignment(ctx));
    printf("data_offset %zu\n", gguf_get_data_offset(ctx));
    for (int64_t k = 0; k < gguf_get_n_kv(ctx); k++) {
        printf("kv ");
        put_str(gguf_get_key(ctx, k));
        enum gguf_type t = gguf_get_kv_type(ctx, k);
        if (t == GGUF_TYPE_ARRAY) {
            enum gguf_type et = gguf_get_arr_type(ctx, k);
            size_t n = gguf_get_arr_n(ctx, k);
            printf(" array %s %zu", gguf_type_name(et), n);
            for (size_t i = 0; i < n; i++) {
                if (et == GGUF_TYPE_STRING) { putchar(' '); put_str(gguf_get_arr_str(ctx, k, i)); }
                else put_elem(et, gguf_get_arr_data(ctx, k), i);
            }
        } else if (t == GGUF_TYPE_STRING) {
            printf(" %s ", gguf_type_name(t));
            put_str(gguf_get_val_str(ctx, k));
        } else {
            printf(" %s", gguf_type_name(t));
            put_elem(t, gguf_get_val_data(ctx, k), 0);
        }
        putchar('\n');
    }
    for (int64_t i = 0; i < gguf_get_n_tensors(ctx); i++) {
        printf("tensor %s type %d offset %zu size %zu\n", gguf_get_tensor_name(ctx, i),
               (int)gguf_get_tensor_type(ctx, i), gguf_get_tensor_offset(ctx, i), gguf_get_tensor_size(ctx, i));
    }
    gguf_free(ctx);
    return 0;
}

static int write_file(const char *path) {
    struct gguf_context *g = gguf_init_empty();
    gguf_set_val_str(g, "general.architecture", "qwen3");
    gguf_set_val_u8(g, "u8", 200);
    gguf_set_val_i8(g, "i8", -100);
    gguf_set_val_u16(g, "u16", 65000);
    gguf_set_val_i16(g, "i16", -32000);
    gguf_set_val_u32(g, "u32", 4000000000u);
    gguf_set_val_i32(g, "i32", -2000000000);
    gguf_set_val_u64(g, "u64", UINT64_MAX);
    gguf_set_val_i64(g, "i64", INT64_MIN);
    gguf_set_val_f32(g, "f32", 1e-6f);
    gguf_set_val_f64(g, "f64", 3.141592653589793);
    gguf_set_val_bool(g, "true", true);
    gguf_set_val_bool(g, "false", false);
    gguf_set_val_str(g, "str", "h\xc3\xa9llo <|im_end|>\n");
    gguf_set_val_str(g, "empty.str", "");
    const int32_t i32s[] = {1, 1, 3, 4, -1};
    gguf_set_arr_data(g, "a.i32", GGUF_TYPE_INT32, i32s, 5);
    const float f32s[] = {0.5f, -2.0f, 1e30f};
    gguf_set_arr_data(g, "a.f32", GGUF_TYPE_FLOAT32, f32s, 3);
    const uint8_t u8s[] = {0, 1, 255};
    gguf_set_arr_data(g, "a.u8", GGUF_TYPE_UINT8, u8s, 3);
    const int64_t i64s[] = {INT64_MIN, 0};
    gguf_set_arr_data(g, "a.i64", GGUF_TYPE_INT64, i64s, 2);
    const double f64s[] = {1e300, -0.25};
    gguf_set_arr_data(g, "a.f64", GGUF_TYPE_FLOAT64, f64s, 2);
    const int8_t bools[] = {1, 0, 1};
    gguf_set_arr_data(g, "a.bool", GGUF_TYPE_BOOL, bools, 3);
    const char *strs[] = {"\xc4\xa0 \xc4\xa0", "", "<think>"};
    gguf_set_arr_str(g, "a.str", strs, 3);
    gguf_set_arr_data(g, "a.empty", GGUF_TYPE_FLOAT32, f32s, 0);

    struct ggml_init_params ip = { .mem_size = 1 << 20, .mem_buffer = NULL, .no_alloc = false };
    struct ggml_context *ctx = ggml_init(ip);
    struct { const char *name; int type; int64_t ne0, ne1; } ts[] = {
        {"token_embd.weight", 41, 256, 8},    // Q1_0
        {"output_norm.weight", 0, 256, 1},    // F32
        {"blk.0.attn_q.weight", 42, 128, 4},  // Q2_0
        {"blk.0.ffn_up.weight", 8, 64, 6},    // Q8_0
        {"blk.0.ffn_down.weight", 12, 512, 2},// Q4_K
        {"blk.0.f16", 1, 5, 3},               // F16
    };
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        struct ggml_tensor *t = ts[i].ne1 == 1 ? ggml_new_tensor_1d(ctx, ts[i].type, ts[i].ne0)
                                               : ggml_new_tensor_2d(ctx, ts[i].type, ts[i].ne0, ts[i].ne1);
        ggml_set_name(t, ts[i].name);
        uint8_t *d = t->data;
        for (size_t j = 0; j < ggml_nbytes(t); j++) d[j] = (uint8_t)(j * 7 + i);
        gguf_add_tensor(g, t);
    }
    bool ok = gguf_write_to_file(g, path, false);
    gguf_free(g);
    ggml_free(ctx);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "dump") == 0) return dump(argv[2]);
    if (argc == 3 && strcmp(argv[1], "write") == 0) return write_file(argv[2]);
    fprintf(stderr, "usage: llamacpp_check dump|write FILE\n");
    return 2;
}
