package sqlite

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/patchline/patchline/internal/benchtest"
	"github.com/patchline/patchline/internal/catalog/catalogtest"
)

// BenchmarkRecordJSON reads records by id from a catalog of 20,000 records
// of 11 KB, the average size of the records of make bench: "hot" asks for
// 200 ids again and again, "all" for every id in random order (at 220 MB,
// most of them are not in the record cache). Both read the body store;
// "append" is "all" through AppendRecordJSON into a buffer of the
// reader's, as GET by id reads; "sqlite" is "all" without the body store,
// from SQLite and the record cache.
func BenchmarkRecordJSON(b *testing.B) {
	db := mustOpenListDB(b)
	rows := catalogtest.GenRows(rand.New(rand.NewPCG(5, 6)), 20000)
	pad := strings.Repeat("x", 11<<10)
	for i := range rows {
		rows[i].Body = []byte(`{"cveId":"` + rows[i].ID + `","pad":"` + pad + `"}`)
	}
	catalogtest.PutRows(b, db, rows)
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	ctx := context.Background()
	read := func(_ []byte, id string) ([]byte, error) { return db.RecordJSON(ctx, id) }
	appendTo := func(buf []byte, id string) ([]byte, error) { return db.AppendRecordJSON(ctx, buf[:0], id) }
	for _, bb := range []struct {
		name string
		ids  []string
		read func(buf []byte, id string) ([]byte, error)
	}{{"hot", ids[:200], read}, {"all", ids, read}, {"append", ids, appendTo}, {"sqlite", ids, read}} {
		if bb.name == "sqlite" {
			if err := os.RemoveAll(db.db.Path + bodyStoreSuffix); err != nil {
				b.Fatal(err)
			}
			db.files.close()
		}
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(rows[0].Body)))
			cpu := benchtest.CPUTime(b)
			b.RunParallel(func(pb *testing.PB) {
				i := rand.IntN(len(bb.ids))
				var buf []byte
				for pb.Next() {
					i = (i + 1) % len(bb.ids)
					body, err := bb.read(buf, bb.ids[i])
					if err != nil || len(body) < len(pad) {
						b.Errorf("read %s = %d bytes, %v", bb.ids[i], len(body), err)
						return
					}
					buf = body
				}
			})
			// The CPU time of a read depends less on what else the
			// machine runs than its wall time does.
			b.ReportMetric(float64((benchtest.CPUTime(b)-cpu).Nanoseconds())/1000/float64(b.N), "cpu-µs/op")
		})
	}
}
