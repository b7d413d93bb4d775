package console

import (
	"context"
	"fmt"
	"net/http"
)

// chart is one bar chart of hourly counts, drawn on the server as SVG.
type chart struct {
	Title string
	Total int
	Max   int
	Bars  []bar
	// Width and Height of the drawing (viewBox units).
	Width, Height int
	// AxisY is the baseline's height; LabelY the labels'.
	AxisY, LabelY int
	// Labels under the axis.
	Labels []axisLabel
	Desc   string
}

type bar struct {
	X, Y, W, H float64
	Title      string
}

type axisLabel struct {
	X    float64
	Text string
}

func (c *Console) charts(ctx context.Context) ([]chart, bool, error) {
	return nil, true, nil
}

func (c *Console) audit(w http.ResponseWriter, r *http.Request, s *session) {
	c.show(w, s, http.StatusOK, "audit.html", "audit", "Audit", nil)
}

var _ = fmt.Sprint
