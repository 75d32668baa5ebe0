package cve

// Lifecycle is the support window of one release of a product, from
// endoflife.date: it fills the eol object of atoms whose fix lands on that
// release.
type Lifecycle struct {
	// Product is the endoflife.date product id: debian, ubuntu, rhel,
	// alpine-linux, windows, macos ...
	Product string `json:"product"`
	// Cycle is the release cycle: "12", "22.04", "3.19".
	Cycle    string `json:"cycle"`
	Codename string `json:"codename,omitempty"`
	// EOL and EOES are the dates (YYYY-MM-DD) of the end of life and of the
	// end of extended support. endoflife.date gives a boolean where it knows
	// no date: true is kept as "true" (ended, date unknown) and false as ""
	// (not ended).
	EOL  string `json:"eol,omitempty"`
	EOES string `json:"eoes,omitempty"`
	// Latest is the latest version or build of the cycle, where known.
	Latest string `json:"latest,omitempty"`
}
