// Package few renders bounded lists of names for messages people read (conditions, Events,
// errors): a few names and how many more, so that a message stays short however long the list.
package few

import (
	"strconv"
	"strings"
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
