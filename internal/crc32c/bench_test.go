package crc32c

import (
	"fmt"
	"hash/crc32"
	"testing"
)

// BenchmarkUpdate compares Update with hash/crc32 on pieces of the sizes
// an MPA CRC covers (an FPDU on a 1500-byte and a loopback MTU), hot (one
// buffer, in cache) and cold (consecutive pieces of 256 MiB).
func BenchmarkUpdate(b *testing.B) {
	big := make([]byte, 256<<20)
	for _, size := range []int{256, 512, 1024, 1448, 4096, 65536} {
		for _, cold := range []bool{false, true} {
			for _, impl := range []string{"crc32c", "hash-crc32"} {
				name := fmt.Sprintf("%d/hot/%s", size, impl)
				if cold {
					name = fmt.Sprintf("%d/cold/%s", size, impl)
				}
				b.Run(name, func(b *testing.B) {
					b.SetBytes(int64(size))
					off := 0
					for b.Loop() {
						p := big[off : off+size]
						if impl == "crc32c" {
							Update(0, p)
						} else {
							crc32.Update(0, stdTable, p)
						}
						if cold {
							if off += size; off+size > len(big) {
								off = 0
							}
						}
					}
				})
			}
		}
	}
}
