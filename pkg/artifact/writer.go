package artifact

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// Writer streams an artifact to a temporary file next to the final path and
// renames it into place on Close. Objects must be written in plan order,
// each with exactly its planned byte count; WriteObject / Begin enforce
// this, and Put accepts objects in any order from concurrent goroutines and
// writes each as soon as its predecessors are written. Any error aborts the
// writer (the temporary file is removed); the final path never holds a
// partial file. All methods are safe for concurrent use.
type Writer struct {
	mu      sync.Mutex
	path    string
	tmp     string
	plan    *Plan    // snapshot of the plan's meta and length
	objects []Object // planned objects; SHA256 filled in as they complete
	index   map[string]int
	dirLen  int      // length of the placeholder directory
	id      [16]byte // the header's artifact_id, also recorded in metadata.artifact_id
	osf     *os.File
	bw      *bufio.Writer
	pos     int64 // payload-relative bytes written
	next    int   // index of the next object to write
	active  *ObjectWriter
	pending map[string][]byte
	err     error // sticky; set once the writer has failed or been aborted
	done    bool  // committed

	// NoReplace makes Close fail (with an error matching fs.ErrExist, the
	// temporary file removed) when path exists at commit, atomically:
	// of two writers racing for one path exactly one commits.
	NoReplace bool

	payloadStart int64 // file offset of the payload
	flushedTo    int64 // file offset up to which writeback has been started
}

// writebackChunk is how many written bytes accumulate before the writer asks
// the kernel to start writing them to disk, so the final fsync has little
// left to wait for.
const writebackChunk = 64 << 20

var errAborted = errors.New("writer aborted")

// Create validates the plan, creates `<path>.tmp-<random>` and writes the
// header, the directory (with placeholder hashes) and the padding. The
// plan must not be changed afterwards.
func Create(path string, plan *Plan) (*Writer, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("%s: artifact id: %w", path, err)
	}
	js, _, err := plan.directory(path, true, id)
	if err != nil {
		return nil, err
	}
	var suffix [6]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, fmt.Errorf("%s: temp name: %w", path, err)
	}
	tmp := path + ".tmp-" + hex.EncodeToString(suffix[:])
	osf, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create artifact: %w", err)
	}
	w := &Writer{
		path: path, tmp: tmp, plan: &Plan{meta: plan.meta, cursor: plan.cursor}, objects: plan.Objects(),
		dirLen: len(js), id: id, osf: osf, bw: bufio.NewWriterSize(osf, 1<<20), pending: map[string][]byte{},
		index: make(map[string]int, len(plan.objects)),
	}
	for i := range w.objects {
		w.index[w.objects[i].ID] = i
	}
	hdr := make([]byte, HeaderSize)
	copy(hdr, magicPrefix)
	hdr[7] = Version
	binary.LittleEndian.PutUint64(hdr[8:], uint64(len(js)))
	copy(hdr[16:], id[:])
	payloadStart := alignPayload(HeaderSize + int64(len(js)))
	w.payloadStart, w.flushedTo = payloadStart, 0
	if err := w.writeRaw(hdr, js, make([]byte, payloadStart-HeaderSize-int64(len(js)))); err != nil {
		return nil, err
	}
	return w, nil
}

func alignPayload(n int64) int64 {
	return (n + PayloadAlignment - 1) / PayloadAlignment * PayloadAlignment
}

func (w *Writer) writeRaw(parts ...[]byte) error {
	for _, p := range parts {
		if _, err := w.bw.Write(p); err != nil {
			return w.fail(fmt.Errorf("%s: write: %w", w.tmp, err))
		}
	}
	return nil
}

// fail records err, removes the temporary file and returns err. Call with
// w.mu held (or before w escapes Create).
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	w.cleanup()
	return err
}

func (w *Writer) cleanup() {
	if w.osf != nil {
		w.osf.Close()
		w.osf = nil
		os.Remove(w.tmp)
	}
}

// Path returns the final path; TempPath the temporary file being written.
func (w *Writer) Path() string     { return w.path }
func (w *Writer) TempPath() string { return w.tmp }

// Next returns the id of the next object to be written ("" when all are).
func (w *Writer) Next() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.next >= len(w.objects) {
		return ""
	}
	return w.objects[w.next].ID
}

// ObjectWriter streams one object's payload in chunks.
type ObjectWriter struct {
	w   *Writer
	obj *Object
	n   int64
	h   hash.Hash
}

// Begin starts streaming the object id, which must be the next in plan order.
func (w *Writer) Begin(id string) (*ObjectWriter, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.begin(id)
}

func (w *Writer) begin(id string) (*ObjectWriter, error) {
	if w.err != nil {
		return nil, w.err
	}
	if w.done {
		return nil, fmt.Errorf("%s: object %s: writer is closed", termsafe.Path(w.path), termsafe.Quote(id))
	}
	if w.active != nil {
		return nil, w.fail(fmt.Errorf("%s: object %s: object %s is still being written", termsafe.Path(w.path), termsafe.Quote(id), termsafe.Quote(w.active.obj.ID)))
	}
	if w.next >= len(w.objects) {
		return nil, w.fail(fmt.Errorf("%s: object %s: all planned objects are already written", termsafe.Path(w.path), termsafe.Quote(id)))
	}
	o := &w.objects[w.next]
	if o.ID != id {
		return nil, w.fail(fmt.Errorf("%s: object %s written out of order: next is %s", termsafe.Path(w.path), termsafe.Quote(id), termsafe.Quote(o.ID)))
	}
	if gap := o.Offset - w.pos; gap > 0 {
		if err := w.writeRaw(make([]byte, gap)); err != nil {
			return nil, err
		}
		w.pos = o.Offset
	}
	w.active = &ObjectWriter{w: w, obj: o, h: sha256.New()}
	return w.active, nil
}

// Write appends p to the object; writing past its planned size is an error.
func (ow *ObjectWriter) Write(p []byte) (int, error) {
	w := ow.w
	w.mu.Lock()
	defer w.mu.Unlock()
	return ow.write(p)
}

func (ow *ObjectWriter) write(p []byte) (int, error) {
	w := ow.w
	if w.err != nil {
		return 0, w.err
	}
	if w.active != ow {
		return 0, fmt.Errorf("%s: object %s: write after close", termsafe.Path(w.path), termsafe.Quote(ow.obj.ID))
	}
	if int64(len(p)) > ow.obj.Bytes-ow.n {
		return 0, w.fail(fmt.Errorf("%s: object %s: %d bytes written, planned size is %d", termsafe.Path(w.path), termsafe.Quote(ow.obj.ID), ow.n+int64(len(p)), ow.obj.Bytes))
	}
	if err := w.writeRaw(p); err != nil {
		return 0, err
	}
	ow.h.Write(p)
	ow.n += int64(len(p))
	w.pos += int64(len(p))
	return len(p), nil
}

// Close finishes the object; fewer bytes than planned is an error.
func (ow *ObjectWriter) Close() error {
	w := ow.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := ow.finish(); err != nil {
		return err
	}
	return w.flushPending()
}

func (ow *ObjectWriter) finish() error {
	w := ow.w
	if w.err != nil {
		return w.err
	}
	if w.active != ow {
		return nil
	}
	if ow.n != ow.obj.Bytes {
		return w.fail(fmt.Errorf("%s: object %s: %d bytes written, planned size is %d", termsafe.Path(w.path), termsafe.Quote(ow.obj.ID), ow.n, ow.obj.Bytes))
	}
	ow.obj.SHA256 = hex.EncodeToString(ow.h.Sum(nil))
	w.active = nil
	w.next++
	return w.startWriteback()
}

// startWriteback starts asynchronous writeback of the bytes written since
// the last call once there are writebackChunk of them (Linux
// sync_file_range; elsewhere a no-op). It does not wait for the disk.
func (w *Writer) startWriteback() error {
	end := w.payloadStart + w.pos
	if end-w.flushedTo < writebackChunk {
		return nil
	}
	if err := w.bw.Flush(); err != nil {
		return w.fail(fmt.Errorf("%s: write: %w", w.tmp, err))
	}
	startWriteback(w.osf, w.flushedTo, end-w.flushedTo)
	w.flushedTo = end
	return nil
}

// WriteObject writes the whole payload of object id, which must be the next
// in plan order and exactly its planned size.
func (w *Writer) WriteObject(id string, data []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.writeWhole(id, data); err != nil {
		return err
	}
	return w.flushPending()
}

func (w *Writer) writeWhole(id string, data []byte) error {
	ow, err := w.begin(id)
	if err != nil {
		return err
	}
	if _, err := ow.write(data); err != nil {
		return err
	}
	return ow.finish()
}

// Put hands over the payload of object id in any order; it is written as
// soon as every earlier object is. Put is meant for parallel encoders: data
// is retained (not copied) until written and must not be modified. Errors of
// a deferred write surface from a later call or from Close.
func (w *Writer) Put(id string, data []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	i, planned := w.index[id]
	if _, dup := w.pending[id]; dup || !planned {
		return w.fail(fmt.Errorf("%s: object %s: not a pending planned object", termsafe.Path(w.path), termsafe.Quote(id)))
	}
	if i < w.next {
		return w.fail(fmt.Errorf("%s: object %s: already written", termsafe.Path(w.path), termsafe.Quote(id)))
	}
	w.pending[id] = data
	return w.flushPending()
}

func (w *Writer) flushPending() error {
	for w.err == nil && w.active == nil && w.next < len(w.objects) {
		id := w.objects[w.next].ID
		data, ok := w.pending[id]
		if !ok {
			break
		}
		delete(w.pending, id)
		if err := w.writeWhole(id, data); err != nil {
			return err
		}
	}
	return w.err
}

// Close checks that every object was written, patches the hashes and then
// the directory digest into the directory, syncs the file and renames it to
// the final path. On failure the
// temporary file is removed. Close after a successful Close is a no-op.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return nil
	}
	if w.err != nil {
		return w.err
	}
	if w.active != nil {
		return w.fail(fmt.Errorf("%s: object %s is still being written", termsafe.Path(w.path), termsafe.Quote(w.active.obj.ID)))
	}
	if w.next < len(w.objects) {
		return w.fail(fmt.Errorf("%s: %d of %d objects written; next is %s", termsafe.Path(w.path), w.next, len(w.objects), termsafe.Quote(w.objects[w.next].ID)))
	}
	if len(w.pending) > 0 {
		return w.fail(fmt.Errorf("%s: %d objects were handed to Put after being written", w.path, len(w.pending)))
	}
	if err := w.bw.Flush(); err != nil {
		return w.fail(fmt.Errorf("%s: write: %w", w.tmp, err))
	}
	js, err := encodeDirectory(w.plan.spec(w.objects, w.id))
	if err == nil {
		err = sealDirectory(js)
	}
	if err != nil {
		return w.fail(fmt.Errorf("%s: %w", w.path, err))
	}
	if len(js) != w.dirLen {
		return w.fail(fmt.Errorf("%s: internal error: directory length changed from %d to %d", w.path, w.dirLen, len(js)))
	}
	if _, err := w.osf.WriteAt(js, HeaderSize); err != nil {
		return w.fail(fmt.Errorf("%s: patch directory: %w", w.tmp, err))
	}
	if err := w.osf.Sync(); err != nil {
		return w.fail(fmt.Errorf("%s: sync: %w", w.tmp, err))
	}
	if err := w.osf.Close(); err != nil {
		w.osf = nil
		os.Remove(w.tmp)
		return w.fail(fmt.Errorf("%s: close: %w", w.tmp, err))
	}
	w.osf = nil
	if w.NoReplace {
		if err := renameNoReplace(w.tmp, w.path); err != nil {
			os.Remove(w.tmp)
			if errors.Is(err, fs.ErrExist) {
				return w.fail(fmt.Errorf("%s exists (use --force to overwrite): %w", w.path, fs.ErrExist))
			}
			return w.fail(fmt.Errorf("commit artifact: %w", err))
		}
	} else if err := os.Rename(w.tmp, w.path); err != nil {
		os.Remove(w.tmp)
		return w.fail(fmt.Errorf("commit artifact: %w", err))
	}
	w.done = true
	return syncDir(filepath.Dir(w.path))
}

// Abort discards the temporary file. It is a no-op after a successful Close,
// so `defer w.Abort()` is safe.
func (w *Writer) Abort() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return nil
	}
	w.fail(fmt.Errorf("%s: %w", w.path, errAborted))
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// WriteSparse writes the header and directory of plan to path (atomically)
// and extends the file to its full length without writing any payload: the
// payload reads as zeros and no sha256 is recorded. It is meant for tests
// and tools that need a realistic header of a large artifact.
func WriteSparse(path string, plan *Plan) error {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("%s: artifact id: %w", path, err)
	}
	js, f, err := plan.directory(path, false, id)
	if err != nil {
		return err
	}
	if err := sealDirectory(js); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	hdr := make([]byte, HeaderSize, HeaderSize+len(js))
	copy(hdr, magicPrefix)
	hdr[7] = Version
	binary.LittleEndian.PutUint64(hdr[8:], uint64(len(js)))
	copy(hdr[16:], id[:])
	var suffix [6]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return fmt.Errorf("%s: temp name: %w", path, err)
	}
	tmp := path + ".tmp-" + hex.EncodeToString(suffix[:])
	osf, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create artifact: %w", err)
	}
	_, err = osf.Write(append(hdr, js...))
	if err == nil {
		err = osf.Truncate(f.Size)
	}
	if cerr := osf.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: write sparse artifact: %w", path, err)
	}
	return nil
}
