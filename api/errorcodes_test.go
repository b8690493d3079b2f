package api_test

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// errorPackages are the packages whose HTTP answers carry the error
// shape: the API, the webhooks, the server around them, /mcp and the
// replicas' proxy.
var errorPackages = []string{".", "../webhooks", "../httpserve", "../mcpserve", "../cluster"}

// TestErrorVocabulary: every error code any HTTP answer of parley's can
// carry is one of the document's ErrorCode enum, and every code the enum
// names is answered somewhere, so the routes speak one vocabulary and the
// document lists it whole.
func TestErrorVocabulary(t *testing.T) {
	doc, err := openAPIDoc()
	if err != nil {
		t.Fatal(err)
	}
	var vocabulary []string
	for _, v := range doc.Components.Schemas["ErrorCode"].Value.Enum {
		vocabulary = append(vocabulary, v.(string))
	}
	used := map[string]string{} // code -> where
	rawCode := regexp.MustCompile(`"code":\s*"([a-z_]+)"`)
	for _, dir := range errorPackages {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		fset := gotoken.NewFileSet()
		consts := map[string]string{}
		var parsed []*ast.File
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			parsed = append(parsed, f)
			ast.Inspect(f, func(n ast.Node) bool {
				if vs, ok := n.(*ast.ValueSpec); ok {
					for i, id := range vs.Names {
						if i < len(vs.Values) {
							if s, ok := stringLit(vs.Values[i]); ok {
								consts[id.Name] = s
							}
						}
					}
				}
				return true
			})
		}
		for _, f := range parsed {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					arg := -1
					switch name := callName(n.Fun); name {
					case "errorf", "fail":
						arg = 1
					case "writeError", "WriteError":
						arg = 2
					}
					if arg < 0 || len(n.Args) <= arg {
						return true
					}
					code, ok := stringLit(n.Args[arg])
					if !ok {
						if id := callName(n.Args[arg]); id != "" {
							code, ok = consts[id]
						}
					}
					if ok {
						used[code] = fset.Position(n.Pos()).String()
					}
				case *ast.BasicLit:
					if s, ok := stringLit(n); ok {
						for _, m := range rawCode.FindAllStringSubmatch(s, -1) {
							used[m[1]] = fset.Position(n.Pos()).String()
						}
					}
				}
				return true
			})
		}
		if dir == "." {
			for name, v := range consts {
				if strings.HasPrefix(name, "Code") {
					used[v] = "api." + name
				}
			}
		}
	}
	for code, where := range used {
		if !slices.Contains(vocabulary, code) {
			t.Errorf("%s answers the error code %q, which openapi.yaml's ErrorCode doesn't list", where, code)
		}
	}
	for _, code := range vocabulary {
		if _, ok := used[code]; !ok {
			t.Errorf("openapi.yaml's ErrorCode lists %q, which no route answers", code)
		}
	}
	if len(used) < 15 {
		t.Errorf("found only %d error codes in the code; the scan is missing them", len(used))
	}
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != gotoken.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// callName is the name an identifier or a selector (pkg.Name) ends in.
func callName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}
