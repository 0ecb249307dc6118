// Package glossary checks that the code obeys docs/architecture.md's glossary: every package
// under internal/ and pkg/ is listed in its Words or Components section, and no two of them
// share a name.
package glossary

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository, from this package's directory.
const root = "../.."

// packages are the Go packages under internal/ and pkg/ (testdata excepted): their directory
// relative to root, and their name.
func packages(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, top := range []string{"internal", "pkg"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			name, err := packageName(path)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = name
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(out) == 0 {
		t.Fatal("no packages found under internal/ and pkg/")
	}
	return out
}

var packageClause = regexp.MustCompile(`^package ([A-Za-z_][A-Za-z0-9_]*)`)

// packageName is the name in the file's package clause.
func packageName(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := packageClause.FindStringSubmatch(sc.Text()); m != nil {
			return m[1], nil
		}
	}
	return "", sc.Err()
}

// glossary is the text of architecture.md's Words and Components sections.
func glossary(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = line == "## Words" || line == "## Components"
		}
		if in {
			out.WriteString(line + "\n")
		}
	}
	if out.Len() == 0 {
		t.Fatal("docs/architecture.md has no Words or Components section")
	}
	return out.String()
}

// listed are the package paths the text names in backquotes: `internal/x/y`, or `internal/x/y`'s
// file (`internal/x/y/z.go`) counts as y's.
func listed(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("`((?:internal|pkg)/[a-z0-9_/]*[a-z0-9_])[^`]*`").FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	return out
}

// TestEveryPackageInGlossary: a package the architecture's Words and Components do not list is
// a word nobody defined.
func TestEveryPackageInGlossary(t *testing.T) {
	names := listed(glossary(t))
	for dir := range packages(t) {
		if !names[dir] {
			t.Errorf("package %s is not listed in docs/architecture.md's Words or Components", dir)
		}
	}
}

// TestOneNameOnePackage: two packages of one name make a reader (and goimports) guess.
func TestOneNameOnePackage(t *testing.T) {
	byName := map[string]string{}
	for dir, name := range packages(t) {
		if other, ok := byName[name]; ok {
			t.Errorf("packages %s and %s are both named %s", other, dir, name)
		}
		byName[name] = dir
	}
}

// TestListed: what the check reads as listed, so that it cannot pass by reading nothing.
func TestListed(t *testing.T) {
	got := listed("a `internal/drain` b `internal/controller/node/nodedecide` (`internal/x/y.go`) `cmd/z` `pkg/evacuation`")
	for _, want := range []string{"internal/drain", "internal/controller/node/nodedecide", "pkg/evacuation"} {
		if !got[want] {
			t.Errorf("%s not read as listed: %v", want, got)
		}
	}
	if !got["internal/x/y"] || got["cmd/z"] || len(got) != 4 {
		t.Errorf("listed: %v, want internal/drain, internal/controller/node/nodedecide, internal/x/y, pkg/evacuation", got)
	}
}
