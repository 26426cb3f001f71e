/* nfsgolden: drive a fixed, small NFS workload with libnfs (sync API) so that
 * the wire traffic can be captured as golden test vectors (testdata/golden/).
 *
 *   gcc -O2 -o /tmp/nfsgolden scripts/golden/nfsgolden.c $(pkg-config --cflags --libs libnfs)
 *   /tmp/nfsgolden 'nfs://127.0.0.1/vfs?nfsport=12049&mountport=12050'   # NFSv3
 *   /tmp/nfsgolden 'nfs://127.0.0.1/vfs?version=4&nfsport=12049' 2048    # NFSv4.0
 *
 * MAXWRITE (default 1 MiB) splits each pwrite into WRITE RPCs of at most that
 * many bytes. libnfs 4.0.0 (Debian 12) cannot encode an NFSv4 WRITE COMPOUND
 * of more than ~4000 bytes ("ZDR error: Failed to encode COMPOUND4args"), so
 * the v4.0 run uses 2048: g4097 is then written as 2048 @ 0 + 2049 @ 2048.
 *
 * Workload (each step is one libnfs call; the file names are fixed):
 *   1. remove g13, g4097, glink (errors ignored)
 *   2. create g13,   pwrite 13 bytes  "Hello, RDMA!\n" at offset 0, fsync, close
 *   3. create g4097, pwrite 4097 bytes at offset 0, byte i = i % 251, fsync, close
 *      (steps 2-3: one WRITE per MAXWRITE bytes)
 *   4. pread g13 (count 13) and g4097 (count 4097) at offset 0, check the data
 *   5. symlink glink -> "g13", readlink glink
 *   6. list the export root (NFSv3: READDIRPLUS)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <fcntl.h>
#include <nfsc/libnfs.h>

static size_t maxw = 1 << 20;  /* bytes per WRITE RPC (argv[2]) */

static void die(struct nfs_context *n, const char *w) { fprintf(stderr, "nfsgolden: %s: %s\n", w, nfs_get_error(n)); exit(1); }

static void put(struct nfs_context *nfs, const char *path, const char *buf, size_t len) {
	struct nfsfh *fh;
	if (nfs_open2(nfs, path, O_WRONLY | O_CREAT | O_TRUNC, 0644, &fh)) die(nfs, "create");
	for (size_t off = 0; off < len; off += maxw) {
		size_t n = len - off < maxw ? len - off : maxw;
		if (nfs_pwrite(nfs, fh, off, n, buf + off) != (int)n) die(nfs, "pwrite");
	}
	if (nfs_fsync(nfs, fh)) die(nfs, "fsync");
	if (nfs_close(nfs, fh)) die(nfs, "close");
}

static void get(struct nfs_context *nfs, const char *path, const char *want, size_t len) {
	struct nfsfh *fh;
	char *buf = malloc(len + 1);
	if (nfs_open(nfs, path, O_RDONLY, &fh)) die(nfs, "open");
	int r = nfs_pread(nfs, fh, 0, len, buf);
	if (r != (int)len || memcmp(buf, want, len)) { fprintf(stderr, "nfsgolden: %s: read %d bytes, mismatch\n", path, r); exit(1); }
	nfs_close(nfs, fh);
	free(buf);
}

int main(int argc, char **argv) {
	if (argc < 2) { fprintf(stderr, "usage: nfsgolden URL [MAXWRITE]\n"); return 2; }
	if (argc > 2) maxw = strtoul(argv[2], 0, 0);
	struct nfs_context *nfs = nfs_init_context();
	struct nfs_url *u = nfs_parse_url_dir(nfs, argv[1]);
	if (!u) die(nfs, "parse url");
	if (nfs_mount(nfs, u->server, u->path)) die(nfs, "mount");

	static const char small[] = "Hello, RDMA!\n";          /* 13 bytes */
	char big[4097];
	for (int i = 0; i < (int)sizeof big; i++) big[i] = (char)(i % 251);

	nfs_unlink(nfs, "/glink"); nfs_unlink(nfs, "/g13"); nfs_unlink(nfs, "/g4097");
	put(nfs, "/g13", small, 13);
	put(nfs, "/g4097", big, sizeof big);
	get(nfs, "/g13", small, 13);
	get(nfs, "/g4097", big, sizeof big);
	if (nfs_symlink(nfs, "g13", "/glink")) die(nfs, "symlink");
	char lbuf[256] = {0};
	if (nfs_readlink(nfs, "/glink", lbuf, sizeof lbuf - 1)) die(nfs, "readlink");
	if (strcmp(lbuf, "g13")) { fprintf(stderr, "nfsgolden: readlink gave %s\n", lbuf); exit(1); }
	struct nfsdir *d;
	if (nfs_opendir(nfs, "/", &d)) die(nfs, "opendir");
	struct nfsdirent *e; int n = 0;
	while ((e = nfs_readdir(nfs, d))) n++;
	nfs_closedir(nfs, d);
	printf("nfsgolden: ok, %d directory entries\n", n);
	nfs_destroy_url(u);
	nfs_destroy_context(nfs);
	return 0;
}
