package admin

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

type row struct {
	name string
	n    int
}

func rows(n int) []row {
	out := make([]row, n)
	for i := range out {
		out[i] = row{name: fmt.Sprintf("r%03d", i), n: (i * 7) % n}
	}
	return out
}

func sorted(target string, in []row) ([]row, Table) {
	r := httptest.NewRequest("GET", target, nil)
	return sortPage(r, "", in, "name", col("name", func(x row) string { return x.name }), col("n", func(x row) int { return x.n }))
}

// Tables sort by the column the link names, either way, page by
// pageSize, keep the rest of the query in their links, and fall back to
// the default order or the nearest page for a link they don't know.
func TestSortPage(t *testing.T) {
	in := rows(120)
	for _, tc := range []struct {
		target      string
		first, last string
		page, pages int
	}{
		{"/admin/x", "r000", "r049", 1, 3},
		{"/admin/x?sort=-name", "r119", "r070", 1, 3},
		{"/admin/x?sort=-name&page=3", "r019", "r000", 3, 3},
		{"/admin/x?sort=bogus&page=99", "r100", "r119", 3, 3},
		{"/admin/x?page=-4", "r000", "r049", 1, 3},
		{"/admin/x?sort=n", "", "", 1, 3}, // checked for order below
	} {
		t.Run(tc.target, func(t *testing.T) {
			got, tab := sorted(tc.target, in)
			if tc.target == "/admin/x?sort=n" {
				for i := 1; i < len(got); i++ {
					if got[i-1].n > got[i].n {
						t.Fatalf("not sorted by n: %v", got)
					}
				}
				return
			}
			if len(got) == 0 || got[0].name != tc.first || got[len(got)-1].name != tc.last || tab.Page != tc.page || tab.Pages != tc.pages {
				t.Fatalf("got %s..%s page %d of %d", got[0].name, got[len(got)-1].name, tab.Page, tab.Pages)
			}
		})
	}
	_, tab := sorted("/admin/x?state=approved&sort=name&page=2", in)
	h := string(tab.Header("name", "Name"))
	if !strings.Contains(h, `aria-sort="ascending"`) || !strings.Contains(h, "sort=-name") || !strings.Contains(h, "state=approved") || strings.Contains(h, "page=") {
		t.Fatalf("the sorted column's heading: %s", h)
	}
	if h := string(tab.Header("n", "N <b>")); !strings.Contains(h, "sort=n") || strings.Contains(h, "aria-sort") || !strings.Contains(h, "N &lt;b&gt;") {
		t.Fatalf("another column's heading: %s", h)
	}
	p := string(tab.Pager())
	if !strings.Contains(p, "page 2 of 3") || !strings.Contains(p, `rel="prev"`) || !strings.Contains(p, `rel="next"`) || !strings.Contains(p, "page=3") || !strings.Contains(p, "state=approved") {
		t.Fatalf("pager: %s", p)
	}
	if _, one := sorted("/admin/x", rows(3)); one.Pager() != "" {
		t.Fatalf("a pager for one page: %s", one.Pager())
	}
	// A second table on the page keeps its own keys.
	r := httptest.NewRequest("GET", "/admin/x?sort=-name&b_sort=-n", nil)
	_, b := sortPage(r, "b_", in, "name", col("name", func(x row) string { return x.name }), col("n", func(x row) int { return x.n }))
	if b.Sort != "n" || !b.Desc || !strings.Contains(string(b.Header("n", "N")), "b_sort=n") || !strings.Contains(string(b.Header("n", "N")), "sort=-name") {
		t.Fatalf("the second table: %+v %s", b, b.Header("n", "N"))
	}
}
