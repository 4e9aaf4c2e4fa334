package artifact

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// File is an opened artifact: the parsed header and directory, and (after
// Map) a read-only memory mapping of the whole file.
type File struct {
	Path         string   // as given to Open; used in error messages
	Version      int      // 3, or 2 for a legacy file opened for inspection
	ID           [16]byte // v3 artifact id (zero for v2)
	JSONBytes    int64    // length of the JSON directory
	PayloadStart int64    // file offset of the payload
	PayloadBytes int64    // declared payload length (v2: file size − PayloadStart)
	Size         int64    // file size in bytes

	Architecture string        // v3: "Qwen3_5ForCausalLM"
	Name         string        // v3: model name
	Resources    []string      // v3: components.text.resources
	MTP          *MTPInfo      // v3: components.mtp, nil when absent
	Proposal     *ProposalInfo // v3: components.proposal, nil when absent
	Metadata     map[string]any
	Provenance   map[string]any
	Identity     *Identity // v2 only

	Objects []Object // in payload order

	// DirectorySHA256 is metadata.directory_sha256 once Open has checked it
	// against the directory; empty when the artifact records none (written
	// before ninfer recorded it), so nothing covers the directory.
	DirectorySHA256 string
	// ArtifactIDChecked: metadata.artifact_id is recorded and equals the
	// header's ID (so the directory digest covers the id); false for an
	// artifact written before the id was recorded.
	ArtifactIDChecked bool

	config *qwen35.Config
	byID   map[string]int
	r      io.ReaderAt
	osf    *os.File
	data   []byte // the mapping, nil until Map
}

// Open reads and validates the header and directory of the artifact at path:
// the container rules, the directory digest when recorded, and the binding
// of the config to the tensor inventory (docs/FORMAT.md §4). It never reads
// payload bytes.
func Open(path string) (*File, error) { return open(path, true) }

// open is Open; bind=false skips the model binding (container-only test
// fixtures).
func open(path string, bind bool) (*File, error) {
	osf, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open artifact: %w", err)
	}
	st, err := osf.Stat()
	if err != nil {
		osf.Close()
		return nil, fmt.Errorf("open artifact: %w", err)
	}
	if !st.Mode().IsRegular() {
		osf.Close()
		return nil, &FormatError{Path: path, Msg: "not a regular file"}
	}
	f, err := parse(path, osf, st.Size(), bind)
	if err != nil {
		osf.Close()
		return nil, err
	}
	f.osf = osf
	return f, nil
}

// OpenMapped opens the artifact at path and memory-maps it.
func OpenMapped(path string) (*File, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	if err := f.Map(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Parse validates the header and directory of an artifact held by r (size
// bytes long) exactly as Open does. name is used in error messages. Only
// bytes before the payload are read. The returned File reads payloads
// through r (Map needs Open).
func Parse(name string, r io.ReaderAt, size int64) (*File, error) { return parse(name, r, size, true) }

func parse(name string, r io.ReaderAt, size int64, bind bool) (*File, error) {
	f := &File{Path: name, Size: size, r: r}
	if err := f.parse(); err != nil {
		return nil, err
	}
	if bind && f.config != nil {
		if err := f.checkModel(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func (f *File) errf(object, msg string, a ...any) error {
	return &FormatError{Path: f.Path, Object: object, Msg: fmt.Sprintf(msg, a...)}
}

func (f *File) readAt(off, n int64) ([]byte, error) {
	buf := make([]byte, n)
	m, err := f.r.ReadAt(buf, off)
	if m == len(buf) {
		return buf, nil // io.ReaderAt may report io.EOF with a full read at the end
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return nil, fmt.Errorf("%s: read [%d,%d): %w", f.Path, off, off+n, err)
}

func (f *File) parse() error {
	if f.Size < V2PrefixSize {
		return f.errf("", "file is %d bytes, too short for a ninfer header", f.Size)
	}
	hdrLen := int64(HeaderSize)
	if f.Size < hdrLen {
		hdrLen = f.Size
	}
	hdr, err := f.readAt(0, hdrLen)
	if err != nil {
		return err
	}
	if string(hdr[:8]) == string(magicPartV3) {
		return f.errf("", "is a continuation part file (NINPRT); open the entry file instead")
	}
	if string(hdr[:7]) != string(magicPrefix) {
		return f.errf("", "bad magic % x: not a ninfer artifact", hdr[:8])
	}
	switch hdr[7] {
	case 1:
		return f.errf("", "artifact v1 is not supported (convert it again with ninfer-convert)")
	case 2:
		f.Version = 2
		return f.parseV2(hdr)
	case 3:
		f.Version = 3
		return f.parseV3(hdr)
	}
	return f.errf("", "unsupported artifact version %d", hdr[7])
}

// directoryBounds validates json_bytes and returns the payload start for a
// header of the given size.
func (f *File) directoryBounds(header int64, jsonBytes uint64) error {
	if jsonBytes == 0 {
		return f.errf("", "json_bytes is 0")
	}
	if jsonBytes > uint64(f.Size-header) {
		return f.errf("", "json_bytes %d extends beyond the end of the file (%d bytes)", jsonBytes, f.Size)
	}
	if jsonBytes > MaxDirectoryBytes {
		return f.errf("", "json_bytes %d exceeds the %d-byte directory limit", jsonBytes, MaxDirectoryBytes)
	}
	f.JSONBytes = int64(jsonBytes)
	f.PayloadStart = format.AlignUp(header+f.JSONBytes, PayloadAlignment)
	return nil
}

func (f *File) parseV3(hdr []byte) error {
	if f.Size < HeaderSize {
		return f.errf("", "file is %d bytes, too short for a v3 header", f.Size)
	}
	copy(f.ID[:], hdr[16:32])
	if err := f.directoryBounds(HeaderSize, binary.LittleEndian.Uint64(hdr[8:16])); err != nil {
		return err
	}
	js, err := f.readAt(HeaderSize, f.JSONBytes)
	if err != nil {
		return err
	}
	if err := f.parseDirectoryV3(js); err != nil {
		return err
	}
	// File length: payload_start + payload_bytes, overflow-safe.
	if f.PayloadBytes > maxInt64-f.PayloadStart {
		return f.errf("", "files[0].payload_bytes %d overflows", f.PayloadBytes)
	}
	if want := f.PayloadStart + f.PayloadBytes; f.Size != want {
		if f.Size < want {
			return f.errf("", "truncated: file is %d bytes, directory declares %d (payload_start %d + payload_bytes %d)", f.Size, want, f.PayloadStart, f.PayloadBytes)
		}
		return f.errf("", "file is %d bytes, directory declares %d (payload_start %d + payload_bytes %d): trailing bytes", f.Size, want, f.PayloadStart, f.PayloadBytes)
	}
	if err := f.checkRanges(); err != nil {
		return err
	}
	if err := f.checkDigest(js); err != nil {
		return err
	}
	return f.checkArtifactID()
}

const maxInt64 = int64(^uint64(0) >> 1)

// checkRanges checks order, alignment and bounds of every object.
func (f *File) checkRanges() error {
	var cursor int64
	for i := range f.Objects {
		o := &f.Objects[i]
		if o.Offset < cursor {
			return f.errf(o.ID, "offset %d overlaps the previous object or is out of order (previous end %d)", o.Offset, cursor)
		}
		if o.IsTensor() && o.Offset%format.TensorAlignment != 0 {
			return f.errf(o.ID, "tensor offset %d is not %d-byte aligned", o.Offset, format.TensorAlignment)
		}
		if o.Offset > f.PayloadBytes || o.Bytes > f.PayloadBytes-o.Offset {
			return f.errf(o.ID, "range [%d,%d) extends beyond the payload (%d bytes) / end of file", o.Offset, uint64(o.Offset)+uint64(o.Bytes), f.PayloadBytes)
		}
		cursor = o.Offset + o.Bytes
	}
	return nil
}

// Map memory-maps the whole file read-only. Bytes returns views into it.
func (f *File) Map() error {
	if f.data != nil {
		return nil
	}
	if f.osf == nil {
		return fmt.Errorf("%s: map: artifact was not opened from a file", f.Path)
	}
	data, err := unix.Mmap(int(f.osf.Fd()), 0, int(f.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("%s: mmap %d bytes: %w", f.Path, f.Size, err)
	}
	f.data = data
	return nil
}

// Mapped reports whether the file is memory-mapped.
func (f *File) Mapped() bool { return f.data != nil }

// Bytes returns a zero-copy read-only view of o's payload, or nil when the
// file is not mapped. o must belong to f. Writing to the slice faults.
func (f *File) Bytes(o *Object) []byte {
	if f.data == nil {
		return nil
	}
	start := f.PayloadStart + o.Offset
	return f.data[start : start+o.Bytes : start+o.Bytes]
}

// ReadObject reads o's payload into a new slice (no mapping needed).
func (f *File) ReadObject(o *Object) ([]byte, error) {
	if b := f.Bytes(o); b != nil {
		return append([]byte(nil), b...), nil
	}
	b, err := f.readAt(f.PayloadStart+o.Offset, o.Bytes)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", termsafe.Quote(o.ID), err)
	}
	return b, nil
}

// Resource returns a copy of the bytes of the resource object id, e.g.
// "frontend/tokenizer.json".
func (f *File) Resource(id string) ([]byte, error) {
	o, ok := f.Object(id)
	if !ok || o.Kind != KindResource {
		return nil, fmt.Errorf("%s: no resource %s", termsafe.Path(f.Path), termsafe.Quote(id))
	}
	return f.ReadObject(o)
}

// Verify recomputes the SHA-256 of o's payload and compares it with the
// recorded hash. It returns (false, nil) when no hash is recorded.
func (f *File) Verify(o *Object) (bool, error) {
	if o.SHA256 == "" {
		return false, nil
	}
	h := sha256.New()
	if b := f.Bytes(o); b != nil {
		h.Write(b)
	} else if _, err := io.Copy(h, io.NewSectionReader(f.r, f.PayloadStart+o.Offset, o.Bytes)); err != nil {
		return false, fmt.Errorf("%s: object %s: %w", termsafe.Path(f.Path), termsafe.Quote(o.ID), err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != o.SHA256 {
		return false, f.errf(o.ID, "sha256 mismatch: payload hashes to %s, directory records %s", got, o.SHA256)
	}
	return true, nil
}

// VerifyAll verifies every recorded hash and returns how many were checked.
func (f *File) VerifyAll() (int, error) {
	n := 0
	for i := range f.Objects {
		ok, err := f.Verify(&f.Objects[i])
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// Close unmaps and closes the file.
func (f *File) Close() error {
	var err error
	if f.data != nil {
		err = unix.Munmap(f.data)
		f.data = nil
	}
	if f.osf != nil {
		if cerr := f.osf.Close(); err == nil {
			err = cerr
		}
		f.osf = nil
	}
	return err
}
