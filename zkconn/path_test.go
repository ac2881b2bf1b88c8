package zkconn

import (
	"errors"
	"strings"
	"testing"

	"github.com/dsync-go/dsync/zkconn/zktest"
	"github.com/go-zookeeper/zk"
)

func TestValidatePath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/locks/orders", true},
		{"/a", true},
		{"/a/b.c/..d/x..", true},
		{"/ünïcode/ok", true},
		{"", false},
		{"locks", false},
		{"/", false},
		{"/locks/", false},
		{"/a//b", false},
		{"/a/./b", false},
		{"/a/../b", false},
		{"/a/.", false},
		{"/a/..", false},
		{"/a\x00b", false},
		{"/a\x01b", false},
		{"/a\u007fb", false},
		{"/a\u009fb", false},
		{"/a\ue000b", false},
		{"/a\ufff0b", false},
		{"/a\xffb", false},
		{"/zookeeper", false},
		{"/zookeeper/quota", false},
		{"/zookeeperish", true},
		{"/a\ud7ffb", true},
		{"/a\uf900b", true},
		{"/a\uffefb", true},
		{"/emoji\U0001F600", false}, // a surrogate pair to the server
		{"/a\U00010000b", false},
		{"/a\U0010FFFFb", false},
	} {
		err := ValidatePath(tc.path)
		if (err == nil) != tc.ok {
			t.Errorf("ValidatePath(%q) = %v; want ok=%v", tc.path, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadPath) {
			t.Errorf("ValidatePath(%q) = %v; want an error wrapping ErrBadPath", tc.path, err)
		}
	}
}

func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"/a", "/a/b", "/a/../b", "/\x00", "/zookeeper", "//", "/a/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if ValidatePath(p) != nil {
			return
		}
		// An accepted path is absolute, has no empty or relative segment
		// and no NUL, and appending a child keeps it valid.
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.HasSuffix(p, "/") ||
			strings.ContainsRune(p, 0) {
			t.Fatalf("ValidatePath accepted %q", p)
		}
		for _, seg := range strings.Split(p[1:], "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("ValidatePath accepted relative segment in %q", p)
			}
		}
		if err := ValidatePath(p + "/child"); err != nil {
			t.Fatalf("ValidatePath(%q) accepted but its child not: %v", p, err)
		}
	})
}

// FuzzValidatePathServer pins ValidatePath accepting characters outside the
// Basic Multilingual Plane, which the server refuses: it compares
// ValidatePath with a real server's verdict on creating the path (its own
// seed corpus runs in go test).
func FuzzValidatePathServer(f *testing.F) {
	for _, s := range []string{
		"a", "a b", "ü", "\U0001F600", "a\U00010000", "\U0010FFFF", "\ud7ff", "\ue000", "\uf8ff",
		"\uf900", "\uffef", "\ufff0", "\ufffd", "\uffff", "\u00a0", "\u009f", "\u007f", "\x1f", "\x00",
		".", "..", "...", ".a", "a.", "a/..", "a/.", "a/", "", "a//b", "\xff", "\xed\xa0\x80", "a/b",
	} {
		f.Add(s)
	}
	c := zktest.Observer(f, shared.Addr())
	const parent = "/fuzz-validate-path"
	if _, err := c.Create(parent, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p := parent + "/" + name
		_, err := c.Create(p, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		// go-zookeeper refuses some paths itself (ErrInvalidPath), all
		// of which the server refuses too (ErrBadArguments); any other
		// answer means the path passed.
		refused := errors.Is(err, zk.ErrBadArguments) || errors.Is(err, zk.ErrInvalidPath)
		if err != nil && !refused && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrNodeExists) &&
			!errors.Is(err, zk.ErrNoChildrenForEphemerals) {
			t.Fatalf("Create(%q) = %v", p, err)
		}
		if verr := ValidatePath(p); (verr != nil) != refused {
			t.Errorf("ValidatePath(%q) = %v; the server's create: %v", p, verr, err)
		}
	})
}

func TestParseProtected(t *testing.T) {
	u := newUUID()
	if len(u) != 36 || u[14] != '8' {
		t.Fatalf("newUUID() = %q; want a 36-char version 8 UUID", u)
	}
	for _, tc := range []struct {
		name, uuid, rest string
		ok               bool
	}{
		{"_c_" + u + "-lock-0000000001", u, "lock-0000000001", true},
		{"_c_" + strings.ToUpper(u) + "-x", strings.ToUpper(u), "x", true},
		{"_c_" + u + "-", u, "", true},
		{"_c_" + u + "lock-0000000001", "", "", false},
		{"lock-0000000001", "", "", false},
		{"_c_0123456789abcdef0123456789abcdef-lock-0000000001", "", "", false}, // go-zookeeper's 32-hex form
		{"_c_" + u[:35] + "g-x", "", "", false},
	} {
		uuid, rest, ok := ParseProtected(tc.name)
		if uuid != tc.uuid || rest != tc.rest || ok != tc.ok {
			t.Errorf("ParseProtected(%q) = %q, %q, %v; want %q, %q, %v", tc.name, uuid, rest, ok, tc.uuid, tc.rest, tc.ok)
		}
	}
}

func TestIsNative(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"_c_" + newUUID() + "-lock-0000000001", true},
		{"_c_9b6e2a3c-5d4f-4e1a-8c7b-0a1b2c3d4e5f-lock-0000000001", false}, // Curator's version 4
		{"_c_0123456789abcdef0123456789abcdef-lock-0000000001", false},     // go-zookeeper's
		{"lock-0000000001", false},
	} {
		if got := IsNative(tc.name); got != tc.want {
			t.Errorf("IsNative(%q) = %v; want %v", tc.name, got, tc.want)
		}
	}
}

func TestKin(t *testing.T) {
	lock := "/p/locks/_c_" + newUUID() + "-lock-0000000001"
	k, _ := kinOf(lock)
	kin := "_c_" + k + newUUID()[kinLen:] + "-lease-0000000004"
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{lock, kin, true},
		{kin, lock, true},
		{lock, "_c_" + newUUID() + "-lease-0000000004", false},
		{"_c_9b6e2a3c-5d4f-4e1a-8c7b-0a1b2c3d4e5f-lock-0000000001",
			"_c_9b6e2a3c-5d4f-4e1a-8c7b-0a1b2c3d4e5f-lease-0000000001", false}, // Curator's: never kin
		{"lock-0000000001", "lock-0000000001", false},
	} {
		if got := Kin(tc.a, tc.b); got != tc.want {
			t.Errorf("Kin(%q, %q) = %v; want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func FuzzParseProtected(f *testing.F) {
	f.Add("_c_" + newUUID() + "-lock-0000000001")
	f.Add("_c_")
	f.Fuzz(func(t *testing.T, name string) {
		uuid, rest, ok := ParseProtected(name)
		if !ok {
			return
		}
		if got := ProtectedPrefix + uuid + "-" + rest; got != name {
			t.Fatalf("ParseProtected(%q) parts rebuild %q", name, got)
		}
	})
}
