// Command printversion prints version.Line, for TestLinkerFlags.
package main

import (
	"fmt"

	"github.com/nodemaint/nodemaint/internal/version"
)

func main() { fmt.Println(version.Line("printversion")) }
