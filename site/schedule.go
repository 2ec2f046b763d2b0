// Package site is the registry of the sites an aggregator harvests: each
// site's definition (a source with its protocol options, its sinks, a
// schedule, a contact and a notification policy) and
// when it is due, kept in the state store beside what its harvests hold.
package site

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule is when a site is harvested: every so many hours, days, weeks
// or months after its last harvest ("every 1d", "every 2w", "every 1mo",
// "every 12h"), or at the times a cron expression names ("0 3 * * *",
// "@daily", "CRON_TZ=Europe/Berlin 0 3 * * 1-5").
type Schedule struct {
	text string
	// n and unit are an "every" schedule's: unit is "h", "d", "w" or "mo".
	n    int
	unit string
	cron cron.Schedule
}

var everyRE = regexp.MustCompile(`^every\s+([1-9][0-9]{0,3})\s*(h|d|w|mo)$`)

// ParseSchedule parses s (see Schedule), a schedule given now: a cron
// expression that never fires is refused. Its error says what is wrong and
// what is taken.
func ParseSchedule(s string) (Schedule, error) {
	when, err := parseSchedule(s)
	if err == nil && when.cron != nil && when.cron.Next(time.Now()).IsZero() {
		return Schedule{}, fmt.Errorf("schedule %q: a cron expression that never fires (such as the 30th of February)", s)
	}
	return when, err
}

// parseSchedule parses s, a cron expression that never fires included (a
// site stored before such were refused: it is never due, see Never).
func parseSchedule(s string) (Schedule, error) {
	text := strings.Join(strings.Fields(s), " ")
	if m := everyRE.FindStringSubmatch(text); m != nil {
		n, _ := strconv.Atoi(m[1])
		return Schedule{text: text, n: n, unit: m[2]}, nil
	}
	if strings.HasPrefix(text, "every") || strings.Contains(text, "@every") {
		// "@every DURATION", the cron library's, takes a zero or a
		// negative period (a harvest back to back): every N is the way.
		return Schedule{}, fmt.Errorf("schedule %q: want every N followed by h, d, w or mo (every 1d, every 2w, every 1mo)", s)
	}
	c, err := cron.ParseStandard(text)
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule %q: neither every N{h,d,w,mo} nor a cron expression: %v", s, err)
	}
	return Schedule{text: text, cron: c}, nil
}

// String returns the schedule as written (white space collapsed).
func (s Schedule) String() string { return s.text }

// IsZero reports whether s is the zero Schedule (none).
func (s Schedule) IsZero() bool { return s.text == "" }

// Next returns the first harvest after one at last: last plus the
// schedule's frequency — in loc's calendar, so that "every 1d" keeps the
// time of day across a daylight-saving change, and "every 1mo" the day of
// the month as time.AddDate does — or the cron expression's next time
// after last (in loc unless the expression names its CRON_TZ).
func (s Schedule) Next(last time.Time, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	t := last.In(loc)
	switch s.unit {
	case "h":
		return t.Add(time.Duration(s.n) * time.Hour)
	case "d":
		return t.AddDate(0, 0, s.n)
	case "w":
		return t.AddDate(0, 0, 7*s.n)
	case "mo":
		return t.AddDate(0, s.n, 0)
	}
	if s.cron != nil {
		return s.cron.Next(t)
	}
	return time.Time{}
}
