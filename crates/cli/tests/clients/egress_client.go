// egress_client: the Go client of the egress client matrix (crates/cli/tests/suite/egress_matrix.rs).
//
// It uses its own http.Transport with Proxy nil, so it ignores HTTP(S)_PROXY the way many Go
// programs do: it reaches a host only through transparent egress (the sandbox's DNS stub and the
// bridge). Roots come from the system pool, which on Linux honours SSL_CERT_FILE.
//
// Usage:
//
//	egress_client get URL [AUTHORIZATION]   prints the body
//	egress_client sse URL                   prints each "data:" line, joined by "."
//	egress_client ws URL                    a WebSocket (wss://) round trip: sends one text
//	                                        message, prints the echo
//
// Exit status 1 (and the error on stderr) when anything fails.
package main

import (
	"bufio"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

func transport() *http.Transport {
	return &http.Transport{
		Proxy:             nil,
		DialContext:       (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSClientConfig:   &tls.Config{},
		ForceAttemptHTTP2: true,
	}
}

func get(u, auth string) error {
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		return err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	c := &http.Client{Transport: transport(), Timeout: 15 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	fmt.Print(string(b))
	return nil
}

func sse(u string) error {
	c := &http.Client{Transport: transport(), Timeout: 15 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "data:") {
			events = append(events, l)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	fmt.Print(strings.Join(events, "."))
	return nil
}

func ws(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "wss" {
		return errors.New("wss:// only")
	}
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = "443"
	}
	d := &net.Dialer{Timeout: 10 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(host, port), &tls.Config{
		ServerName: host,
		NextProtos: []string{"http/1.1"},
	})
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	key := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	path := u.RequestURI()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
		path, u.Host, base64.StdEncoding.EncodeToString(key))
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return fmt.Errorf("handshake status %d", resp.StatusCode)
	}
	msg := []byte("hello-ws")
	mask := make([]byte, 4)
	if _, err := rand.Read(mask); err != nil {
		return err
	}
	frame := []byte{0x81, 0x80 | byte(len(msg))}
	frame = append(frame, mask...)
	for i, b := range msg {
		frame = append(frame, b^mask[i%4])
	}
	if _, err := conn.Write(frame); err != nil {
		return err
	}
	head := make([]byte, 2)
	if _, err := io.ReadFull(r, head); err != nil {
		return err
	}
	n := uint64(head[1] & 0x7f)
	switch n {
	case 126:
		ext := make([]byte, 2)
		if _, err := io.ReadFull(r, ext); err != nil {
			return err
		}
		n = uint64(binary.BigEndian.Uint16(ext))
	case 127:
		ext := make([]byte, 8)
		if _, err := io.ReadFull(r, ext); err != nil {
			return err
		}
		n = binary.BigEndian.Uint64(ext)
	}
	if n > 1<<20 {
		return errors.New("frame too large")
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return err
	}
	fmt.Print(string(payload))
	return nil
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: egress_client get|sse|ws URL [AUTHORIZATION]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "get":
		auth := ""
		if len(os.Args) > 3 {
			auth = os.Args[3]
		}
		err = get(os.Args[2], auth)
	case "sse":
		err = sse(os.Args[2])
	case "ws":
		err = ws(os.Args[2])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
