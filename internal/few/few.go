// Package few keeps the messages people read (conditions, Events, errors) within their bounds: a
// few names of a list and how many more, and a message cut to the length its field takes.
package few

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Most is how many names a message names by default.
const Most = 5

// Names names at most most of the list, in its order, and counts the rest: "a, b, c and 4 more".
// A most below 1 names one.
func Names(list []string, most int) string {
	most = max(most, 1)
	if len(list) <= most {
		return strings.Join(list, ", ")
	}
	return Of(list[:most], len(list))
}

// Of names the names given (a few of a longer list, already chosen) and counts the rest of the
// total: "a, b and 4 more" for two names of 6. A total below the names given counts none.
func Of(names []string, total int) string {
	s := strings.Join(names, ", ")
	if more := total - len(names); more > 0 {
		if s == "" {
			return strconv.Itoa(more) + " more"
		}
		s += " and " + strconv.Itoa(more) + " more"
	}
	return s
}

// MaxEventNote is the longest note the API server takes in an Event (events.k8s.io/v1); an Event
// with a longer one is refused, and lost.
const MaxEventNote = 1024

// Cut shortens s to at most n bytes (and so n characters), at a character boundary, marking the
// cut with an ellipsis.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	end := n - len(ellipsis)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + ellipsis
}
