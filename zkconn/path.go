package zkconn

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ValidatePath reports whether p is a path ZooKeeper accepts for a node that
// dsync may create children under. The rules are ZooKeeper's: absolute, no
// trailing slash, no empty, "." or ".." segment, no NUL, no control
// characters (U+0001–U+001F, U+007F–U+009F) and none of the code points
// ZooKeeper reserves (U+D800–U+F8FF, U+FFF0–U+FFFF). The server (Java's
// PathUtils.validatePath) checks UTF-16 code units, in which a character
// outside the Basic Multilingual Plane (U+10000 and up, emoji among them) is
// a surrogate pair in U+D800–U+DFFF: it refuses those, and so does
// ValidatePath. A string that is not valid UTF-8 reaches the server as
// U+FFFD, which it refuses too. dsync also refuses the root itself and the
// /zookeeper subtree, which the server owns. The error wraps ErrBadPath and
// says which rule p broke.
func ValidatePath(p string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrBadPath, p, why) }
	switch {
	case p == "":
		return bad("empty")
	case p[0] != '/':
		return bad("must start with /")
	case p == "/":
		return bad("the root cannot be used")
	case p[len(p)-1] == '/':
		return bad("must not end with /")
	case p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/"):
		return bad("/zookeeper is reserved for the server")
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return bad("empty segment")
		case ".", "..":
			return bad("relative segment " + seg)
		}
	}
	for _, r := range p {
		switch {
		case r == 0:
			return bad("contains NUL")
		case r < 0x20, r >= 0x7f && r <= 0x9f:
			return bad(fmt.Sprintf("contains control character %U", r))
		case r >= 0xd800 && r <= 0xf8ff, r >= 0xfff0 && r <= 0xffff:
			return bad(fmt.Sprintf("contains reserved character %U", r))
		case r > 0xffff:
			return bad(fmt.Sprintf("contains %U, outside the Basic Multilingual Plane (a UTF-16 surrogate pair)", r))
		}
	}
	return nil
}

// parentOf returns the parent of an absolute path ("/" for a top-level node).
func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}
