// Command hostpathplugin stands in for the proxy mode of csi-driver-host-path's image, which
// upstream's DRA e2e suite runs inside a pod on each node: it listens on a unix socket (where
// the kubelet connects, for plugin registration and DRA) and on a TCP port (which the suite
// reaches through pods/portforward), and joins each connection of the kubelet with one of the
// suite's. The suite dials its connections in advance, so they wait here until the kubelet comes.
//
// Only the two flags the suite passes are read; the others are accepted and ignored.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	endpoint := flag.String("endpoint", "", "unix socket the kubelet connects to (unix:// optional)")
	proxy := flag.String("proxy-endpoint", "", "tcp://[host]:port the e2e suite connects to")
	flag.Int("v", 0, "ignored")
	flag.Parse()
	if *endpoint == "" || !strings.HasPrefix(*proxy, "tcp://") {
		log.Fatalf("usage: hostpathplugin --endpoint=<socket> --proxy-endpoint=tcp://:<port>")
	}
	socket := strings.TrimPrefix(*endpoint, "unix://")
	// A socket left by an earlier run (the suite removes it only after the run ends) would make
	// the listen fail.
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Fatalf("remove stale socket: %v", err)
	}
	kubelet, err := net.Listen("unix", socket)
	if err != nil {
		log.Fatalf("listen on %s: %v", socket, err)
	}
	suite, err := net.Listen("tcp", strings.TrimPrefix(*proxy, "tcp://"))
	if err != nil {
		log.Fatalf("listen on %s: %v", *proxy, err)
	}
	say(fmt.Sprintf("proxying %s to %s", socket, suite.Addr()))

	waiting := make(chan net.Conn, 64)
	go func() {
		for {
			conn, err := suite.Accept()
			if err != nil {
				log.Fatalf("accept on %s: %v", suite.Addr(), err)
			}
			waiting <- conn
		}
	}()
	for {
		conn, err := kubelet.Accept()
		if err != nil {
			log.Fatalf("accept on %s: %v", socket, err)
		}
		peer := nextLive(waiting)
		say("joined a kubelet connection with a suite connection")
		go join(conn, peer)
	}
}

// nextLive is the oldest suite connection that its side has not closed meanwhile (gRPC closes a
// connection that sends nothing for two minutes).
func nextLive(waiting <-chan net.Conn) net.Conn {
	for conn := range waiting {
		if live, ok := probe(conn); ok {
			return live
		}
		conn.Close()
	}
	panic("unreachable")
}

// probe reads what the suite's side may have sent already (an HTTP/2 server speaks first), so a
// closed connection shows; the byte read is handed on in front of the rest.
func probe(conn net.Conn) (net.Conn, bool) {
	first := make([]byte, 1)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	n, err := conn.Read(first)
	_ = conn.SetReadDeadline(time.Time{})
	if n == 1 {
		return &prefixed{Conn: conn, prefix: first}, true
	}
	var netErr net.Error
	return conn, errors.As(err, &netErr) && netErr.Timeout()
}

type prefixed struct {
	net.Conn
	prefix []byte
}

func (p *prefixed) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

func (p *prefixed) CloseWrite() error {
	if half, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return half.CloseWrite()
	}
	return nil
}

func join(a, b net.Conn) {
	var wg sync.WaitGroup
	copyHalf := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if half, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = half.CloseWrite()
		}
	}
	wg.Add(2)
	go copyHalf(a, b)
	go copyHalf(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

// say writes a line for the suite's log; once the suite's exec session is gone, writing fails
// and the process ends, as the real plugin does when its session is cancelled.
func say(line string) {
	if _, err := fmt.Println(line); err != nil {
		os.Exit(0)
	}
}
