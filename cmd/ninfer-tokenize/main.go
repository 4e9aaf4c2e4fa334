// Command ninfer-tokenize turns text into token ids and ids back into text
// with the tokenizer of a .ninfer artifact or a tokenizer.json; its id
// output is a corpus for ninfer-bench --corpus and ninfer-eval --corpus.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ninfer/ninfer/pkg/chat"
	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/corpus"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/termsafe"
	"github.com/ninfer/ninfer/pkg/tokenizer"
)

const name = "ninfer-tokenize"

func main() {
	ctx, _ := cliutil.NotifyStop(context.Background())
	os.Exit(run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command and returns its exit status: 0, 1 for runtime
// errors (unreadable or malformed input), 2 for usage errors, 128 + the
// signal when stopped by one.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := cliutil.Prepare(newApp(), stdout, stderr)
	app.Action = func(c *cli.Context) error { return action(ctx, c, stdin, stdout, stderr) }
	return cliutil.Run(app, args, stderr)
}

func newApp() *cli.App {
	return &cli.App{
		Name:      name,
		Usage:     "text to token ids, or ids to text (--decode), with a model's tokenizer",
		UsageText: name + " (--weights M.ninfer | --tokenizer tokenizer.json) [--decode] [--whole] [--chat] [--special=false] [--output-file PATH] [FILE | - | < input]",
		Description: `Input: the FILE argument, or stdin ("-" or no argument), read as a stream.

Text to ids (default): each input line becomes one output line of
space-separated decimal ids (the newline itself is not encoded; a blank
line gives a blank line). --whole tokenizes the whole input as one
sequence, newlines included, and writes its ids 16 per line. Either output
is a token-id corpus (docs/CLI.md, pkg/corpus): ninfer-bench --corpus and
ninfer-eval --corpus read it as one sequence of ids (for a corpus of prose,
--whole keeps the newline tokens that the per-line mode drops).

--decode: ids to text. Each input line of ids becomes one output line of
text; with --whole all ids of the input are one sequence, decoded and
written as it is (no newline added). An id that is not a non-negative
int32 below the tokenizer's vocabulary is an error naming the line and
position (exit 1).

--special (default true): text such as <|im_start|> is the special token;
--special=false tokenizes it as plain text (and --decode --special=false
leaves special tokens out of the text).

--chat: the input is a conversation in JSON, rendered with the Qwen chat
template (pkg/chat) and then tokenized: either an array of messages
[{"role": "user", "content": "..."}] or an object {"messages": [...],
"tools": [...], "add_generation_prompt": true, "enable_thinking": false}.
One conversation per line (JSONL), or the whole input with --whole.

Output goes to stdout, flushed per line; --output-file PATH writes it
atomically when the input is done (nothing is written after an error or a
stopping signal). Errors are one line on stderr. Exit status: 0 ok, 2 usage
error, 1 runtime error, 130 interrupted (143 SIGTERM, 129 SIGHUP).

Examples:
   ninfer-tokenize --weights build/shakespeare-q8.ninfer --whole play.txt > play.ids
   ninfer-bench --weights build/shakespeare-q8.ninfer --corpus play.ids -p 256 -n 64
   echo "To be, or not to be" | ninfer-tokenize --tokenizer models/tiny-shakespeare/tokenizer.json
   ninfer-tokenize --tokenizer models/tiny-shakespeare/tokenizer.json --decode models/tiny-shakespeare/bench_corpus.ids --whole
   echo '[{"role":"user","content":"Hi"}]' | ninfer-tokenize --weights m.ninfer --chat`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "weights", Aliases: []string{"m"}, Usage: "use the tokenizer of the .ninfer model `PATH`"},
			&cli.StringFlag{Name: "tokenizer", Usage: "use the tokenizer.json at `PATH` (a tokenizer_config.json beside it is read too)"},
			&cli.BoolFlag{Name: "decode", Aliases: []string{"d"}, Usage: "ids to text"},
			&cli.BoolFlag{Name: "whole", Usage: "the whole input is one sequence, not one per line"},
			&cli.BoolFlag{Name: "special", Value: true, Usage: "recognize special-token text (decode: write special tokens); --special=false to turn off"},
			&cli.BoolFlag{Name: "chat", Usage: "the input is a JSON conversation, rendered with the chat template first"},
			&cli.StringFlag{Name: "output-file", Aliases: []string{"o"}, Usage: "write the output to `PATH` atomically instead of stdout"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no 'wrote' line on stderr"},
		},
	}
}

// loadTokenizer loads the tokenizer from --weights or --tokenizer.
func loadTokenizer(c *cli.Context) (*tokenizer.Tokenizer, error) {
	if p := c.String("tokenizer"); p != "" {
		tj, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("--tokenizer: %w", err)
		}
		var tc []byte
		cfg := filepath.Join(filepath.Dir(p), "tokenizer_config.json")
		if b, err := os.ReadFile(cfg); err == nil {
			tc = b
		}
		tok, err := tokenizer.Load(tj, tc)
		if err != nil {
			return nil, namedFileError(err, p, cfg)
		}
		return tok, nil
	}
	p := c.String("weights")
	w, err := loader.OpenWeights(p)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	tj, ok := w.Resource("tokenizer.json")
	if !ok {
		return nil, fmt.Errorf("%s: the artifact has no tokenizer.json", p)
	}
	tc, _ := w.Resource("tokenizer_config.json")
	tok, err := tokenizer.Load(tj, tc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return tok, nil
}

// namedFileError names the file of a tokenizer.Load error by the path it
// was read from: Load has only the bytes and names the file at fault by its
// usual name (tokenizer.FileError: "tokenizer.json", "tokenizer_config.json"),
// right inside an artifact ("M.ninfer: tokenizer.json: …"); for
// --tokenizer PATH it is PATH, or CFG, the tokenizer_config.json read beside
// it. The wrapped error stays reachable (a *json.SyntaxError in it still
// gives cliutil.ErrorText its byte position).
func namedFileError(err error, path, cfg string) error {
	var fe *tokenizer.FileError
	if !errors.As(err, &fe) {
		return fmt.Errorf("%s: %w", termsafe.Path(path), err)
	}
	named := path
	if fe.File == "tokenizer_config.json" {
		named = cfg
	}
	return fmt.Errorf("%s: %w", termsafe.Path(named), fe.Err)
}

func checkUsage(c *cli.Context) error {
	if err := cliutil.Args(c, 0, 1, "at most one input FILE"); err != nil {
		return err
	}
	switch {
	case c.IsSet("weights") == c.IsSet("tokenizer"):
		return cliutil.Usagef("give exactly one of --weights and --tokenizer")
	case c.IsSet("weights") && c.String("weights") == "":
		return cliutil.Usagef("--weights is empty")
	case c.IsSet("tokenizer") && c.String("tokenizer") == "":
		return cliutil.Usagef("--tokenizer is empty")
	case c.Bool("chat") && c.Bool("decode"):
		return cliutil.Usagef("--chat renders text to tokenize; it cannot be combined with --decode")
	case c.Bool("chat") && !c.Bool("special"):
		return cliutil.Usagef("--chat needs the special tokens of the template; it cannot be combined with --special=false")
	}
	if err := cliutil.CheckOutputFile("--output-file", c.String("output-file"), ""); err != nil {
		return err
	}
	tokJSON := c.String("tokenizer")
	var tokConfig string // read beside --tokenizer when present
	if tokJSON != "" {
		tokConfig = filepath.Join(filepath.Dir(tokJSON), "tokenizer_config.json")
	}
	in := c.Args().First()
	if in == "" {
		in = "-" // standard input is read
	}
	return cliutil.CheckIO("--output-file", c.String("output-file"), c.String("weights"), tokJSON, tokConfig, in)
}

// errStopped: a stopping signal arrived.
var errStopped = errors.New("stopped")

func action(ctx context.Context, c *cli.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := checkUsage(c); err != nil {
		return err
	}
	in, inName := stdin, "stdin"
	if p := c.Args().First(); p != "" && p != "-" {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		in, inName = f, p
	}
	tok, err := loadTokenizer(c)
	if err != nil {
		return err
	}
	outFile := c.String("output-file")
	var buf bytes.Buffer
	dst := stdout
	if outFile != "" {
		dst = &buf
	}
	w := bufio.NewWriter(dst)
	t := &tool{tok: tok, special: c.Bool("special"), chat: c.Bool("chat"), name: inName, w: w}
	if c.Bool("whole") {
		err = t.whole(ctx, in, c.Bool("decode"))
	} else {
		err = t.lines(ctx, in, c.Bool("decode"))
	}
	if errors.Is(err, errStopped) {
		w.Flush()
		return cliutil.StopCause(ctx)
	}
	if err != nil {
		w.Flush()
		return err
	}
	if err := w.Flush(); err != nil && outFile == "" {
		return nil // stdout closed (a pipe to head): not an error of the input
	}
	if outFile != "" {
		if err := cliutil.WriteFileAtomic(outFile, buf.Bytes()); err != nil {
			return fmt.Errorf("--output-file: %w", err)
		}
		if !c.Bool("quiet") {
			fmt.Fprintf(stderr, "%s: wrote %s\n", name, termsafe.Path(outFile))
		}
	}
	return nil
}

type tool struct {
	tok     *tokenizer.Tokenizer
	special bool
	chat    bool
	name    string // the input, for errors
	w       *bufio.Writer
	ids     []byte
}

// lines converts the input line by line, flushing after each line.
func (t *tool) lines(ctx context.Context, in io.Reader, decode bool) error {
	r := cliutil.NewLineReader(in, t.name, cliutil.MaxLineBytes)
	for n := 1; ; n++ {
		if ctx.Err() != nil {
			return errStopped
		}
		line, err := r.ReadLine(n)
		if err != nil && err != io.EOF {
			return err
		}
		if line == "" && err == io.EOF {
			return nil
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if e := t.convert(line, decode, n, true); e != nil {
			return e
		}
		if e := t.w.Flush(); e != nil {
			return nil // the reader of stdout went away
		}
		if err == io.EOF {
			return nil
		}
	}
}

// whole converts the whole input as one sequence.
func (t *tool) whole(ctx context.Context, in io.Reader, decode bool) error {
	if decode {
		// The ids are read line by line (errors name the line), then
		// decoded together.
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		var ids []int32
		for n := 1; sc.Scan(); n++ {
			if ctx.Err() != nil {
				return errStopped
			}
			v, err := corpus.ParseLine(sc.Text(), t.name, n, t.tok.VocabSize())
			if err != nil {
				return err
			}
			ids = append(ids, v...)
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		_, err := t.w.WriteString(t.tok.Decode(ids, !t.special))
		return err
	}
	data, err := cliutil.ReadAllLimit(in, t.name, cliutil.MaxInputBytes)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return errStopped
	}
	return t.convert(string(data), false, 0, false)
}

// convert handles one unit: a line (n ≥ 1, perLine) or the whole input.
func (t *tool) convert(s string, decode bool, n int, perLine bool) error {
	if decode {
		ids, err := corpus.ParseLine(s, t.name, n, t.tok.VocabSize())
		if err != nil {
			return err
		}
		t.w.WriteString(t.tok.Decode(ids, !t.special))
		t.w.WriteByte('\n')
		return nil
	}
	if t.chat {
		if perLine && strings.TrimSpace(s) == "" {
			t.w.WriteByte('\n')
			return nil
		}
		where := t.name
		if perLine {
			where = fmt.Sprintf("%s: line %d", t.name, n)
		}
		text, err := render(s, where)
		if err != nil {
			return err
		}
		s = text
	}
	ids := t.tok.Encode(s, t.special)
	if perLine {
		t.ids = corpus.AppendLine(t.ids[:0], ids)
		_, err := t.w.Write(t.ids)
		return err
	}
	return corpus.Write(t.w, ids, corpus.PerLine)
}

// conversation is the object form of --chat input.
type conversation struct {
	Messages            []chat.Message    `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	EnableThinking      *bool             `json:"enable_thinking"`
}

// render renders a --chat conversation (a message array or an object).
func render(s, where string) (string, error) {
	var conv conversation
	d := strings.TrimSpace(s)
	var err error
	if strings.HasPrefix(d, "[") {
		err = json.Unmarshal([]byte(d), &conv.Messages)
	} else {
		dec := json.NewDecoder(strings.NewReader(d))
		dec.DisallowUnknownFields()
		err = dec.Decode(&conv)
	}
	if err != nil {
		return "", fmt.Errorf("%s: --chat: not a conversation (a JSON array of messages or an object with \"messages\"): %v", where, err)
	}
	opts := chat.Options{AddGenerationPrompt: conv.AddGenerationPrompt, Tools: conv.Tools,
		DisableThinking: conv.EnableThinking != nil && !*conv.EnableThinking}
	text, err := chat.Render(conv.Messages, opts)
	if err != nil {
		return "", fmt.Errorf("%s: %w", where, err)
	}
	return text, nil
}
