package admin

import (
	"cmp"
	"fmt"
	"html"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// pageSize is how many rows a table shows a page.
const pageSize = 50

// Table is the state of one sortable, paged table: which column it is
// sorted by, which page it shows, and the links to change either. The
// sorting and paging happen on the server; the links are plain links, so
// the pages need no script.
type Table struct {
	prefix string // before "sort" and "page" in the query, for a second table on a page
	path   string
	query  url.Values
	Sort   string // a column's key
	Desc   bool
	Page   int // from 1
	Pages  int
	Rows   int
}

// column is one sortable column: its key in links and how it orders rows.
type column[T any] struct {
	key     string
	compare func(a, b T) int
}

// col is a column ordered by one field.
func col[T any, V cmp.Ordered](key string, field func(T) V) column[T] {
	return column[T]{key: key, compare: func(a, b T) int { return cmp.Compare(field(a), field(b)) }}
}

// sortPage sorts rows by the column the request names (def, "-" before a
// key for descending, when it names none it knows) and cuts out the page
// it asks for.
func sortPage[T any](r *http.Request, prefix string, rows []T, def string, cols ...column[T]) ([]T, Table) {
	return sortPageSized(r, prefix, rows, pageSize, def, cols...)
}

// sortPageSized is sortPage with size rows a page.
func sortPageSized[T any](r *http.Request, prefix string, rows []T, size int, def string, cols ...column[T]) ([]T, Table) {
	q := r.URL.Query()
	t := Table{prefix: prefix, path: r.URL.Path, query: q, Rows: len(rows)}
	want := q.Get(prefix + "sort")
	pick := func(s string) (column[T], bool, bool) {
		key, desc := strings.CutPrefix(s, "-")
		for _, c := range cols {
			if c.key == key {
				return c, desc, true
			}
		}
		return column[T]{}, false, false
	}
	c, desc, ok := pick(want)
	if !ok {
		c, desc, ok = pick(def)
	}
	if ok {
		t.Sort, t.Desc = c.key, desc
		rows = slices.Clone(rows)
		slices.SortStableFunc(rows, func(a, b T) int {
			if desc {
				return c.compare(b, a)
			}
			return c.compare(a, b)
		})
	}
	t.Pages = max(1, (len(rows)+size-1)/size)
	t.Page, _ = strconv.Atoi(q.Get(prefix + "page"))
	t.Page = min(max(t.Page, 1), t.Pages)
	from := (t.Page - 1) * size
	return rows[from:min(from+size, len(rows))], t
}

// link is the table's address with its sort and page set, the rest of the
// query kept.
func (t Table) link(sort string, page int) string {
	q := url.Values{}
	for k, v := range t.query {
		q[k] = v
	}
	q.Set(t.prefix+"sort", sort)
	if page > 1 {
		q.Set(t.prefix+"page", strconv.Itoa(page))
	} else {
		q.Del(t.prefix + "page")
	}
	return t.path + "?" + q.Encode()
}

// sortKey is the sort value of the current order.
func (t Table) sortKey() string {
	if t.Desc {
		return "-" + t.Sort
	}
	return t.Sort
}

// Header is a column's heading: a link that sorts by it (descending when
// it sorts so already ascending), marked for screen readers.
func (t Table) Header(key, label string) template.HTML {
	next, sortAttr, arrow := key, "", ""
	if t.Sort == key {
		if t.Desc {
			sortAttr, arrow = ` aria-sort="descending"`, " ▼"
		} else {
			next, sortAttr, arrow = "-"+key, ` aria-sort="ascending"`, " ▲"
		}
	}
	return template.HTML(fmt.Sprintf(`<th%s><a class="sort" href="%s">%s%s</a></th>`, sortAttr,
		html.EscapeString(t.link(next, 1)), html.EscapeString(label), arrow))
}

// Pager is the links to the table's other pages; nothing for one page.
func (t Table) Pager() template.HTML {
	if t.Pages <= 1 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<nav class="pager" aria-label="pages"><span>page %d of %d (%d rows)</span>`, t.Page, t.Pages, t.Rows)
	if t.Page > 1 {
		fmt.Fprintf(&b, ` <a rel="prev" href="%s">previous</a>`, html.EscapeString(t.link(t.sortKey(), t.Page-1)))
	}
	if t.Page < t.Pages {
		fmt.Fprintf(&b, ` <a rel="next" href="%s">next</a>`, html.EscapeString(t.link(t.sortKey(), t.Page+1)))
	}
	b.WriteString(`</nav>`)
	return template.HTML(b.String())
}
