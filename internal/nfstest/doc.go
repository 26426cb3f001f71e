// Package nfstest starts real third-party NFS peers for tests: a private
// nfs-ganesha on free loopback ports (FSAL VFS over a temporary
// directory; started by the subpackage ganesha, which tests of packages
// this one imports use directly), and finds the libnfs command-line tools. A test that needs a
// peer the machine lacks is skipped with the reason
// (scripts/install-deps.sh --test installs them).
package nfstest
