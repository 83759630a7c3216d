/* Single-bit damage to a checkpoint, for tests/checkpoint/bitflips.sh and damaged_run.sh. Serial
 * (one rank, no mpirun needed).
 *
 *   test_ckpt_flips all FILE SCRATCH        every bit of every metadata byte of FILE (the bytes
 *                                           outside the datasets' raw data: HDF5's structures,
 *                                           the user block, free space) flipped in turn in a copy
 *                                           at SCRATCH, each read with txl_ckpt_peek: every one
 *                                           must be refused with one line naming SCRATCH
 *   test_ckpt_flips sample FILE N           N metadata bytes spread evenly over FILE's: "OFFSET"
 *                                           lines, for the tools to be run on
 *   test_ckpt_flips chunk FILE DATASET      flips one bit in the middle of DATASET's first chunk
 *                                           (raw data: what Fletcher32 guards)
 *
 * Which bytes are raw data comes from HDF5 on the intact FILE (H5Dget_chunk_info), checked
 * against H5Dread_chunk: the chunk's bytes must be where the addresses say. */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist.h"
#include "src/base/error.h"
#include "src/checkpoint/checkpoint.h"

typedef struct {
  unsigned char *bytes; /* the file */
  size_t size;
  unsigned char *data;  /* 1 for a byte of raw data */
  char first_chunk_of[256];
  long long first_at; /* the first chunk of first_chunk_of: offset, size */
  long long first_size;
  hsize_t base; /* HDF5's addresses are relative to the end of the user block */
  int bad;
} FileMap;

static void mark(FileMap *m, unsigned long long at, unsigned long long n) {
  if (at + n > m->size) {
    fprintf(stderr, "a chunk at %llu of %llu bytes lies past the end of the file\n", at, n);
    m->bad = 1;
    return;
  }
  memset(m->data + at, 1, n);
}

/* The raw data of one dataset: each chunk's bytes checked against a direct read of it. */
static void map_dataset(FileMap *m, hid_t d, const char *name) {
  hsize_t n = 0;
  hid_t sp = H5Dget_space(d); /* (HDF5 1.10 takes no H5S_ALL here) */
  if (sp < 0 || H5Dget_num_chunks(d, sp, &n) < 0) { /* contiguous (the empty /mems) */
    const haddr_t at = H5Dget_offset(d);
    if (at != HADDR_UNDEF) mark(m, m->base + at, H5Dget_storage_size(d));
    H5Eclear2(H5E_DEFAULT);
    if (sp >= 0) H5Sclose(sp);
    return;
  }
  for (hsize_t i = 0; i < n && !m->bad; i++) {
    hsize_t off[8];
    unsigned mask;
    haddr_t at;
    hsize_t size;
    if (H5Dget_chunk_info(d, sp, i, off, &mask, &at, &size) < 0) {
      m->bad = 1;
      break;
    }
    at += m->base;
    unsigned char *raw = txl_malloc(size, "chunk");
    uint32_t filters = 0;
    if (H5Dread_chunk(d, H5P_DEFAULT, off, &filters, raw) < 0 || at + size > m->size ||
        memcmp(raw, m->bytes + at, size) != 0) {
      fprintf(stderr, "%s: chunk %llu is not at the file offset %llu that HDF5 gives\n", name,
              (unsigned long long)i, (unsigned long long)at);
      m->bad = 1;
    }
    free(raw);
    mark(m, at, size);
    if (i == 0 && strcmp(name, m->first_chunk_of) == 0) {
      m->first_at = (long long)at;
      m->first_size = (long long)size;
    }
  }
  H5Sclose(sp);
}

static herr_t visit_cb(hid_t obj, const char *name, const H5O_info_t *info, void *data) {
  if (info->type != H5O_TYPE_DATASET) return 0;
  hid_t d = H5Dopen2(obj, name, H5P_DEFAULT);
  if (d < 0) return -1;
  char full[256];
  snprintf(full, sizeof full, "/%s", name);
  map_dataset(data, d, full);
  H5Dclose(d);
  return 0;
}

static void map_file(FileMap *m, const char *path, const char *dataset) {
  memset(m, 0, sizeof *m);
  snprintf(m->first_chunk_of, sizeof m->first_chunk_of, "%s", dataset ? dataset : "");
  m->first_at = -1;
  FILE *f = fopen(path, "rb");
  struct stat sb;
  if (!f || stat(path, &sb) != 0) txl_fatal("%s: %s", path, strerror(errno));
  m->size = (size_t)sb.st_size;
  m->bytes = txl_malloc(m->size, "file");
  m->data = txl_calloc(m->size, 1, "data map");
  if (fread(m->bytes, 1, m->size, f) != m->size) txl_fatal("%s: cannot read it", path);
  fclose(f);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t fcpl = file < 0 ? -1 : H5Fget_create_plist(file);
  if (fcpl < 0 || H5Pget_userblock(fcpl, &m->base) < 0) txl_fatal("%s: cannot open it with HDF5", path);
  H5Pclose(fcpl);
  if (H5Ovisit(file, H5_INDEX_NAME, H5_ITER_INC, visit_cb, m) < 0 || m->bad)
    txl_fatal("%s: cannot map its datasets' raw data", path);
  H5Fclose(file);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void put_byte(int fd, size_t at, unsigned char v) {
  if (pwrite(fd, &v, 1, (off_t)at) != 1) txl_fatal("writing the scratch copy: %s", strerror(errno));
}

/* Every bit of every metadata byte, through txl_ckpt_peek. Returns the number accepted. */
static int mode_all(const char *path, const char *scratch) {
  FileMap m;
  map_file(&m, path, NULL);
  FILE *f = fopen(scratch, "wb");
  if (!f || fwrite(m.bytes, 1, m.size, f) != m.size || fclose(f) != 0) txl_fatal("%s: cannot write it", scratch);
  int fd = open(scratch, O_WRONLY);
  if (fd < 0) txl_fatal("%s: %s", scratch, strerror(errno));
  long long n_meta = 0, flips = 0, accepted = 0, not_one_line = 0, digest = 0, header = 0, size = 0;
  char err[2048], prefix[1100];
  snprintf(prefix, sizeof prefix, "%s: ", scratch);
  const double t0 = now_s();
  for (size_t at = 0; at < m.size; at++) {
    if (m.data[at]) continue;
    n_meta++;
    for (int bit = 0; bit < 8; bit++, flips++) {
      put_byte(fd, at, m.bytes[at] ^ (unsigned char)(1u << bit));
      err[0] = '\0';
      if (txl_ckpt_peek(scratch, NULL, NULL, err, sizeof err) == 0) {
        if (accepted++ < 5) printf("FAIL byte %zu bit %d: the damaged file was accepted\n", at, bit);
      } else if (strncmp(err, prefix, strlen(prefix)) != 0 || strchr(err, '\n')) {
        if (not_one_line++ < 5) printf("FAIL byte %zu bit %d: not one line naming the file: %s\n", at, bit, err);
      } else {
        digest += strstr(err, "SHA-256 digest does not match") != NULL;
        header += strstr(err, "digest header") != NULL;
        size += strstr(err, "bytes, it should have") != NULL;
      }
    }
    put_byte(fd, at, m.bytes[at]);
  }
  close(fd);
  const double dt = now_s() - t0;
  printf("%lld flips of the %lld metadata bytes of %s (%zu bytes): %lld refused (%lld by the digest, %lld by the "
         "digest header, %lld by the stored size), %lld accepted, %lld not one line naming the file; %.1f s "
         "(%.0f us a flip)\n", flips, n_meta, path, m.size, flips - accepted - not_one_line, digest, header, size,
         accepted, not_one_line, dt, flips ? 1e6 * dt / (double)flips : 0.0);
  free(m.bytes);
  free(m.data);
  return accepted || not_one_line || n_meta == 0 ? 1 : 0;
}

static int mode_sample(const char *path, int n) {
  FileMap m;
  map_file(&m, path, NULL);
  long long n_meta = 0;
  for (size_t at = 0; at < m.size; at++) n_meta += !m.data[at];
  for (long long k = 0, seen = 0, next = n_meta / (2 * (n > 0 ? n : 1)); k < n && n_meta > 0;) {
    for (size_t at = 0; at < m.size && k < n; at++) {
      if (m.data[at]) continue;
      if (seen++ == next) {
        printf("%zu\n", at);
        k++;
        next = (k * n_meta + n_meta / 2) / n; /* the middle of each of n equal shares */
      }
    }
    break;
  }
  free(m.bytes);
  free(m.data);
  return 0;
}

static int mode_chunk(const char *path, const char *dataset) {
  FileMap m;
  map_file(&m, path, dataset);
  if (m.first_at < 0) txl_fatal("%s: no chunk of %s", path, dataset);
  const long long at = m.first_at + m.first_size / 2;
  int fd = open(path, O_WRONLY);
  if (fd < 0) txl_fatal("%s: %s", path, strerror(errno));
  put_byte(fd, (size_t)at, m.bytes[at] ^ 0x10);
  close(fd);
  printf("flipped bit 4 of byte %lld, inside the first chunk of %s\n", at, dataset);
  free(m.bytes);
  free(m.data);
  return 0;
}

int main(int argc, char **argv) {
  TxlDist dist;
  txl_dist_init(&dist, &argc, &argv);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  int rc = 2;
  if (argc == 4 && strcmp(argv[1], "all") == 0) rc = mode_all(argv[2], argv[3]);
  else if (argc == 4 && strcmp(argv[1], "sample") == 0) rc = mode_sample(argv[2], atoi(argv[3]));
  else if (argc == 4 && strcmp(argv[1], "chunk") == 0) rc = mode_chunk(argv[2], argv[3]);
  else fprintf(stderr, "usage: test_ckpt_flips all FILE SCRATCH | sample FILE N | chunk FILE DATASET\n");
  txl_dist_finalize();
  return rc;
}
