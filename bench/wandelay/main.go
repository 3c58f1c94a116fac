// Command wandelay delays every IP packet routed through a TUN device by a
// fixed time: the WAN delay of bench/geo.sh's testbed. This kernel has no
// netem, and Toxiproxy proxies one TCP address to one upstream (it would
// need a proxy per worker and data center, and workers advertising a
// different address to each data center); a delay line in the router
// namespace delays every flow between data centers without either.
//
// The router sends packets between data centers into the device (policy
// routing: packets that arrive on a data center's bridge are routed to
// it); each is read, held until its time, and written back, and the
// kernel routes it on to its data center, where the bridge's tbf limits
// the bandwidth. Packets leave in the order they came (the delay is the
// same for all), so a single queue keeps them in time order.
//
// Usage: wandelay -dev NAME -delay DURATION (Linux, root or CAP_NET_ADMIN)
package main

import (
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"
)

const (
	tunSetIff = 0x400454ca // TUNSETIFF
	iffTun    = 0x0001
	iffNoPi   = 0x1000
)

type packet struct {
	due  time.Time
	data []byte
}

// openTun attaches to (or creates) the TUN device name: IP packets with
// no packet-information header.
func openTun(name string) (*os.File, error) {
	fd, err := syscall.Open("/dev/net/tun", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening /dev/net/tun: %w", err)
	}
	var req [40]byte // struct ifreq: the name, then the flags
	copy(req[:16], name)
	*(*uint16)(unsafe.Pointer(&req[16])) = iffTun | iffNoPi
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), tunSetIff,
		uintptr(unsafe.Pointer(&req[0]))); e != 0 {
		syscall.Close(fd)
		return nil, fmt.Errorf("attaching to %s: %w", name, e)
	}
	return os.NewFile(uintptr(fd), name), nil
}

func main() {
	dev := flag.String("dev", "wan0", "the TUN device")
	delay := flag.Duration("delay", 20*time.Millisecond, "one-way delay of every packet")
	flag.Parse()
	tun, err := openTun(*dev)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wandelay:", err)
		os.Exit(1)
	}
	// A bandwidth-delay product of 1 Gbit/s x 100 ms in 1,500-byte
	// packets; the reader blocks (and the device's queue drops) beyond.
	queue := make(chan packet, 1<<14)
	go func() {
		for p := range queue {
			if d := time.Until(p.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := tun.Write(p.data); err != nil {
				fmt.Fprintln(os.Stderr, "wandelay: writing:", err)
			}
		}
	}()
	buf := make([]byte, 65536)
	for {
		n, err := tun.Read(buf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "wandelay: reading:", err)
			os.Exit(1)
		}
		data := make([]byte, n)
		copy(data, buf[:n])
		queue <- packet{due: time.Now().Add(*delay), data: data}
	}
}
