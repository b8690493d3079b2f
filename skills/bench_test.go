package skills_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyd/parley/skills"
)

// BenchmarkLoad is what a turn of an agent with 50 skills (each a 4 KiB
// SKILL.md) spends finding them and writing the prompt's index: skills are
// read afresh each turn, so an edit shows on the next one.
func BenchmarkLoad(b *testing.B) {
	dir := b.TempDir()
	files := map[string]string{}
	for i := range 50 {
		files[fmt.Sprintf("s%02d/SKILL.md", i)] = skillMD(fmt.Sprintf("skill-%02d", i), "Does task number "+fmt.Sprint(i)+".", strings.Repeat("Step.\n", 680))
	}
	write(b, dir, files)
	b.ReportAllocs()
	for b.Loop() {
		list, problems := skills.Load([]string{filepath.Join(dir, "missing"), dir})
		if len(list) != 50 || len(problems) != 0 || skills.Index(list) == "" {
			b.Fatalf("%d skills, %v", len(list), problems)
		}
	}
}
