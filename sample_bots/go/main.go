// A 3UP 3DOWN bot in Go, standard library only (protocol v1, PROTOCOL.md):
// it plays legal[0] (always legal). Built static, it runs in an image FROM
// scratch (Dockerfile beside it). It listens on --port PORT or, in the
// service's container, on the unix socket $BOT_UNIX (--unix PATH overrides).
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
)

var secret = os.Getenv("BOT_SECRET")

// signed: whether the body carries the referee's signature (or no secret is set).
func signed(r *http.Request, body []byte) bool {
	if secret == "" {
		return true
	}
	given := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Referee-Signature")))
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(given), []byte(want))
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// post reads a POST body, checks its signature and decodes it into v; false when it answered an error.
func post(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.Method != http.MethodPost {
		reply(w, 405, map[string]string{"error": "use POST"})
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		reply(w, 400, map[string]string{"error": err.Error()})
		return false
	}
	if !signed(r, body) {
		reply(w, 401, map[string]string{"error": "missing or bad X-Referee-Signature"})
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		reply(w, 400, map[string]string{"error": "bad JSON: " + err.Error()})
		return false
	}
	return true
}

type act struct {
	GameID    string            `json:"game_id"`
	RequestID string            `json:"request_id"`
	Turn      int               `json:"turn"`
	Legal     []json.RawMessage `json:"legal"`
}

type notice struct {
	GameID string `json:"game_id"`
}

func main() {
	port := flag.Int("port", 0, "TCP port to listen on (127.0.0.1)")
	unix := flag.String("unix", os.Getenv("BOT_UNIX"), "unix socket to listen on (default $BOT_UNIX)")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			reply(w, 404, map[string]string{"error": "no " + r.URL.Path})
			return
		}
		reply(w, 200, map[string]string{"apiversion": "1", "name": "go-first", "author": "referee", "version": "1"})
	})
	for _, path := range []string{"/start", "/end"} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			var n notice
			if post(w, r, &n) {
				reply(w, 200, map[string]bool{"ok": true})
			}
		})
	}
	mux.HandleFunc("/act", func(w http.ResponseWriter, r *http.Request) {
		var a act
		if !post(w, r, &a) {
			return
		}
		if a.RequestID == "" || len(a.Legal) == 0 {
			reply(w, 400, map[string]string{"error": "an /act body needs request_id and a non-empty legal"})
			return
		}
		// One whole line a print, naming its game: the service sorts the output by game with it.
		fmt.Printf("[game %s turn %d] playing legal[0] of %d\n", a.GameID, a.Turn, len(a.Legal))
		reply(w, 200, map[string]any{"request_id": a.RequestID, "index": 0})
	})
	var ln net.Listener
	var err error
	if *port != 0 || *unix == "" {
		ln, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	} else {
		os.Remove(*unix)
		ln, err = net.Listen("unix", *unix)
	}
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("go-first listening on %s", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}
