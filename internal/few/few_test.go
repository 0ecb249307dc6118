package few

import (
	"fmt"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	list := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("n%d", i))
		}
		return out
	}
	for _, tc := range []struct {
		list []string
		most int
		want string
	}{
		{nil, 5, ""},
		{list(1), 5, "n0"},
		{list(5), 5, "n0, n1, n2, n3, n4"},
		{list(6), 5, "n0, n1, n2, n3, n4 and 1 more"},
		{list(64), 3, "n0, n1, n2 and 61 more"},
		{list(3), 0, "n0 and 2 more"},
	} {
		if got := Names(tc.list, tc.most); got != tc.want {
			t.Errorf("Names(%d names, %d) = %q, want %q", len(tc.list), tc.most, got, tc.want)
		}
	}
	if got := Of([]string{"a", "b"}, 6); got != "a, b and 4 more" {
		t.Errorf("Of = %q", got)
	}
	if got := Of(nil, 3); got != "3 more" {
		t.Errorf("Of(nil, 3) = %q", got)
	}
	if got := Of([]string{"a"}, 0); got != "a" {
		t.Errorf("Of(a, 0) = %q", got)
	}
}

// However long the list and its names, the rendering names at most most of them.
func TestNamesBounded(t *testing.T) {
	long := strings.Repeat("x", 253)
	var list []string
	for range 100000 {
		list = append(list, long)
	}
	if got := Names(list, Most); len(got) > Most*(253+2)+len(" and 99995 more") {
		t.Errorf("%d bytes", len(got))
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a longer message", 10, "a longe…"},
		{"ééééé", 8, "éé…"}, // never half a character
	} {
		if got := Cut(tc.in, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
