/*
 * edgekit-capi: a C99 program over edgekit_c.h, both the API's usage example and how
 * the tests drive it on the host and under qemu. Results are JSON on stdout; a
 * failure prints "edgekit-capi: error: <status>: <message>" on stderr and exits with
 * the ek_status value.
 *
 *   edgekit-capi version
 *   edgekit-capi [--pubkey KEY.pub.pem] COMMAND ...  open only sets signed by that key (ek_open_signed)
 *   edgekit-capi describe ASSETS [OPTIONS_JSON]
 *   edgekit-capi selftest ASSETS [MODEL]
 *   edgekit-capi run ASSETS MODEL IMAGE...        one JSON line per image
 *   edgekit-capi ocr ASSETS IMAGE...               one JSON line per image (models picked by task)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgekit_c.h"

static int fail(ek_status status) {
  fprintf(stderr, "edgekit-capi: error: %s: %s\n", ek_status_name(status), ek_last_error());
  return (int)status;
}

static int usage(void) {
  fprintf(stderr,
          "usage: edgekit-capi version\n"
          "       edgekit-capi [--pubkey KEY.pub.pem] describe ASSETS [OPTIONS_JSON]\n"
          "       edgekit-capi selftest ASSETS [MODEL]\n"
          "       edgekit-capi run ASSETS MODEL IMAGE...\n"
          "       edgekit-capi ocr ASSETS IMAGE...\n");
  return 2;
}

/* The whole file, malloc'd; NULL when it cannot be read. */
static unsigned char* read_all(const char* path, size_t* size) {
  FILE* file = fopen(path, "rb");
  unsigned char* data = NULL;
  long length;
  if (!file) return NULL;
  if (fseek(file, 0, SEEK_END) == 0 && (length = ftell(file)) > 0 && fseek(file, 0, SEEK_SET) == 0) {
    data = (unsigned char*)malloc((size_t)length);
    if (data && fread(data, 1, (size_t)length, file) != (size_t)length) {
      free(data);
      data = NULL;
    }
    *size = (size_t)length;
  }
  fclose(file);
  return data;
}

static ek_status decode_file(const char* path, ek_image* image) {
  size_t size = 0;
  unsigned char* bytes = read_all(path, &size);
  ek_status status;
  if (!bytes) {
    fprintf(stderr, "edgekit-capi: error: cannot read %s\n", path);
    return EK_E_INPUT;
  }
  status = ek_image_decode(bytes, size, image);
  free(bytes);
  return status;
}

/* Prints a library-owned JSON string and releases it. */
static void print_json(char* json) {
  printf("%s\n", json);
  ek_free(json);
}

/* The PEM public key at `path` as its 32 raw bytes. */
static ek_status read_key(const char* path, uint8_t* key) {
  size_t size = 0;
  unsigned char* text = read_all(path, &size);
  char* pem;
  ek_status status;
  if (!text) {
    fprintf(stderr, "edgekit-capi: error: cannot read %s\n", path);
    return EK_E_ARGUMENT;
  }
  pem = (char*)malloc(size + 1);
  if (!pem) {
    free(text);
    return EK_E_INTERNAL;
  }
  memcpy(pem, text, size);
  pem[size] = '\0';
  free(text);
  status = ek_public_key_from_pem(pem, key);
  free(pem);
  return status;
}

static int each_image(ek_assets* assets, const char* model, int ocr, int count, char** files) {
  int i;
  for (i = 0; i < count; ++i) {
    ek_image image;
    char* json = NULL;
    ek_status status = decode_file(files[i], &image);
    if (status != EK_OK) return fail(status);
    status = ocr ? ek_ocr(assets, NULL, NULL, NULL, &image, &json) : ek_run(assets, model, &image, &json);
    ek_image_free(&image);
    if (status != EK_OK) return fail(status);
    print_json(json);
  }
  return 0;
}

int main(int argc, char** argv) {
  ek_assets* assets = NULL;
  char* json = NULL;
  ek_status status;
  uint8_t key[32];
  const uint8_t* pubkey = NULL; /* --pubkey: every open requires a signature by it */
  int code = 0;
  if (argc == 2 && strcmp(argv[1], "version") == 0) {
    printf("%s\n", ek_version());
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "--pubkey") == 0) {
    status = read_key(argv[2], key);
    if (status != EK_OK) return fail(status);
    pubkey = key;
    argv += 2;
    argc -= 2;
  }
  if (argc < 3) return usage();
  if (strcmp(argv[1], "describe") == 0) {
    status = ek_open_signed(argv[2], argc > 3 ? argv[3] : NULL, pubkey, &assets);
    if (status != EK_OK) return fail(status);
    status = ek_describe(assets, &json);
    if (status == EK_OK) print_json(json); else code = fail(status);
  } else if (strcmp(argv[1], "selftest") == 0) {
    status = ek_open_signed(argv[2], NULL, pubkey, &assets);
    if (status != EK_OK) return fail(status);
    status = ek_selftest(assets, argc > 3 ? argv[3] : NULL, &json);
    if (json) print_json(json); /* the report comes with EK_E_SELFTEST too */
    if (status != EK_OK) code = fail(status);
  } else if (strcmp(argv[1], "run") == 0 && argc >= 5) {
    status = ek_open_signed(argv[2], NULL, pubkey, &assets);
    if (status != EK_OK) return fail(status);
    code = each_image(assets, argv[3], 0, argc - 4, argv + 4);
  } else if (strcmp(argv[1], "ocr") == 0 && argc >= 4) {
    status = ek_open_signed(argv[2], NULL, pubkey, &assets);
    if (status != EK_OK) return fail(status);
    code = each_image(assets, NULL, 1, argc - 3, argv + 3);
  } else {
    return usage();
  }
  ek_close(assets);
  return code;
}
