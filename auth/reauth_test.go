package auth

import (
	"testing"

	"github.com/sluice-proxy/sluice/protocol"
)

func attrs(kv ...string) []byte {
	var b []byte
	for _, s := range kv {
		b = protocol.AppendLenEncString(b, []byte(s))
	}
	return b
}

func TestAnswersFromLoginScramble(t *testing.T) {
	for _, c := range []struct {
		name  string
		attrs []byte
		want  bool
	}{
		{"libmariadb", attrs("_os", "Linux", "_client_name", "libmariadb", "_pid", "1"), true},
		{"libmysql", attrs("_client_name", "libmysql"), true},
		{"mysqlnd", attrs("_client_name", "mysqlnd"), false},
		{"go driver", attrs("_client_name", "Go-MySQL-Driver"), false},
		{"none", nil, false},
		{"value is a key's", attrs("x", "_client_name", "libmariadb", "y"), false},
		{"truncated value", attrs("_client_name")[:5], false},
		{"key without value", attrs("_client_name"), false},
		{"bad length", []byte{0xff, 1, 2}, false},
		{"length past the end", []byte{0xfc, 0xff, 0xff}, false},
	} {
		if got := answersFromLoginScramble(c.attrs); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestReauthCloseNilAndTwice(t *testing.T) {
	var r *Reauth
	r.Close()
	if r.Kept() {
		t.Fatal("a nil Reauth keeps a connection")
	}
	released := 0
	r = &Reauth{release: func() { released++ }}
	r.Close()
	r.Close()
	if released != 1 {
		t.Fatalf("slot released %d times, want 1", released)
	}
}
