package ratelimit

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies is a set of trusted reverse proxies: requests that arrive from one
// of them name the client in X-Forwarded-For.
type Proxies []netip.Prefix

// ParseProxies reads a comma-separated list of CIDRs or bare addresses
// ("10.0.0.0/8, 192.0.2.7"). An empty string trusts no proxy.
func ParseProxies(s string) (Proxies, error) {
	var ps Proxies
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: want a CIDR or an address", f)
			}
			a = a.Unmap()
			ps = append(ps, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: want a CIDR or an address", f)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		ps = append(ps, p.Masked())
	}
	return ps, nil
}

// Contains reports whether a is one of the trusted proxies.
func (ps Proxies) Contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddr returns the address of the client that made r: the peer
// address, or, when the peer is a trusted proxy, the right-most address of
// X-Forwarded-For that is not a trusted proxy (entries further left were
// written by the client itself and can be forged). It returns the zero Addr
// when the peer address cannot be read.
func (ps Proxies) ClientAddr(r *http.Request) netip.Addr {
	peer := parseHostPort(r.RemoteAddr)
	if !peer.IsValid() || len(ps) == 0 || !ps.Contains(peer) {
		return peer
	}
	client := peer
	values := r.Header.Values("X-Forwarded-For")
	for i := len(values) - 1; i >= 0; i-- {
		hops := strings.Split(values[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			a := parseHostPort(strings.TrimSpace(hops[j]))
			if !a.IsValid() {
				return client // a malformed entry: trust no further
			}
			client = a
			if !ps.Contains(a) {
				return a
			}
		}
	}
	return client
}

// parseHostPort reads "1.2.3.4", "1.2.3.4:5", "::1", "[::1]:5" or "[::1]",
// without the zone of an IPv6 address, and IPv4-mapped IPv6 as IPv4.
func parseHostPort(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().WithZone("").Unmap()
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return a.WithZone("").Unmap()
}

// Key returns the rate-limit key of a client address: the address itself for
// IPv4, its /64 network for IPv6 (one subscriber usually holds a whole /64),
// and "unknown" for the zero Addr.
func Key(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "unknown"
	case a.Is4():
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}
