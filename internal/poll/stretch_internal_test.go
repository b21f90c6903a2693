package poll

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestStretchedBudget(t *testing.T) {
	const base = 200 * time.Microsecond
	for _, c := range []struct {
		name      string
		base, gap time.Duration
		want      time.Duration
	}{
		{"a gap twice over", base, 300 * time.Microsecond, 600 * time.Microsecond},
		{"never below the base", base, 50 * time.Microsecond, base},
		{"at most the limit", base, 500 * time.Microsecond, StretchLimit * base},
		{"a gap at the limit still counts", base, StretchLimit * base, StretchLimit * base},
		{"a longer gap: back to the base", base, StretchLimit*base + 1, base},
		{"seconds: back to the base", base, 3 * time.Second, base},
		{"a base that blocks at once stays", -1, 100 * time.Microsecond, -1},
	} {
		assert.Equal(t, c.want, stretchedBudget(c.base, c.gap), c.name)
	}
}

func TestBlindBudget(t *testing.T) {
	const base = 200 * time.Microsecond
	for _, c := range []struct {
		name         string
		base, budget time.Duration
		found        bool
		want         time.Duration
	}{
		{"work during the block doubles", base, base, true, 2 * base},
		{"and doubles again", base, 2 * base, true, 4 * base},
		{"up to the limit", base, blindStretchLimit * base, true, blindStretchLimit * base},
		{"never past it", base, 5 * base, true, blindStretchLimit * base},
		{"idle: back to the base", base, blindStretchLimit * base, false, base},
		{"never below the base", base, base / 4, true, 2 * base},
		{"a base that blocks at once stays", -1, 0, true, -1},
	} {
		assert.Equal(t, c.want, blindBudget(c.base, c.budget, c.found), c.name)
	}
}
