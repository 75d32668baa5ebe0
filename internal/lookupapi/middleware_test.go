package lookupapi

import (
	"net/textproto"
	"testing"
)

func TestHeaderKeysAreCanonical(t *testing.T) {
	for _, k := range []string{
		keyACAllowOrigin, keyACExposeHeaders, keyCacheControl, keyContentLength, keyContentType,
		keyETag, keyNoSniff, keyRateLimit, keyRateRemaining, keyRateReset,
	} {
		if c := textproto.CanonicalMIMEHeaderKey(k); c != k {
			t.Errorf("header key %q is not canonical: %q", k, c)
		}
	}
}
