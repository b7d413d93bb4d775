package console

import (
	"context"
	"fmt"
	"time"
)

// chart is one bar chart of hourly counts over the last 24 hours, drawn on
// the server as SVG (no script, no external image).
type chart struct {
	Title string
	Total int64
	Max   int64
	Bars  []bar
	// Width and Height of the drawing (viewBox units); AxisY is the
	// baseline's height, LabelY the labels'.
	Width, Height int
	AxisY, LabelY int
	Labels        []axisLabel
	// Desc is the chart's text alternative.
	Desc string
}

type bar struct {
	X, Y, W, H float64
	Title      string
}

type axisLabel struct {
	X    float64
	Text string
}

// The charts of the overview: the stored counters' names and titles.
var chartNames = []struct{ Name, Title string }{
	{"tokens_issued", "Tokens issued"},
	{"refusals", "Refusals"},
	{"logins", "Logins"},
	{"login_failures", "Failed logins"},
}

const (
	chartWidth  = 480
	chartHeight = 150
	chartBars   = 120 // height of the bars' area
)

// charts draws the last 24 hours of every counter of chartNames from the
// counts every instance adds to storage (ops.HourlyCounts).
func (c *Console) charts(ctx context.Context) ([]chart, error) {
	names := make([]string, 0, len(chartNames))
	for _, n := range chartNames {
		names = append(names, n.Name)
	}
	hc, err := c.cfg.Ops().HourlyCounts(ctx, c.now(), 24, names...)
	if err != nil {
		return nil, err
	}
	out := make([]chart, 0, len(chartNames))
	for _, n := range chartNames {
		out = append(out, drawChart(n.Title, hc.Counts[n.Name], hc.Hours[0]))
	}
	return out, nil
}

// drawChart lays out 24 hourly values starting at start.
func drawChart(title string, values []int64, start time.Time) chart {
	ch := chart{Title: title, Width: chartWidth, Height: chartHeight, AxisY: chartBars + 2, LabelY: chartHeight - 6}
	for _, v := range values {
		ch.Total += v
		ch.Max = max(ch.Max, v)
	}
	slot := float64(chartWidth) / float64(len(values))
	for i, v := range values {
		h := 0.0
		if ch.Max > 0 {
			h = float64(v) / float64(ch.Max) * chartBars
		}
		hour := start.Add(time.Duration(i) * time.Hour)
		ch.Bars = append(ch.Bars, bar{X: float64(i)*slot + 1, Y: chartBars - h, W: slot - 2, H: h,
			Title: fmt.Sprintf("%s %s: %d", title, hour.Format("15:04 UTC"), v)})
		if i%6 == 0 {
			ch.Labels = append(ch.Labels, axisLabel{X: float64(i)*slot + 1, Text: hour.Format("15:04")})
		}
	}
	ch.Desc = fmt.Sprintf("%s per hour over the last 24 hours: %d in all, at most %d in one hour.", title, ch.Total, ch.Max)
	return ch
}
