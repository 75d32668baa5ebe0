package catalog

// WatchEvery lets the tests of package catalog_test set watchEvery.
var WatchEvery = &watchEvery
