package admin

import "time"

// nowFunc is the clock the pages read.
var nowFunc = time.Now
