//go:build race

package evloop

import "syscall"

// Under the race detector sockConn reads and writes through package
// syscall: its calls tell the detector that what one goroutine wrote to a
// socket happens before what another read from one, which raw system calls
// would hide (the detector would then report races the kernel orders).

func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return err.(syscall.Errno)
}
