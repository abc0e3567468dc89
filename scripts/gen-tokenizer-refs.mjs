// gen-tokenizer-refs.mjs - reference token ids for tests/run/tokenizer_test.cpp, made by
// llama.cpp's own tokenizer (node-llama-cpp's prebuilt binary; offline from a local registry):
//   npm i -E node-llama-cpp@3.21.1        (in a scratch folder outside the repository)
//   UV_THREADPOOL_SIZE=1 node scripts/gen-tokenizer-refs.mjs /path/to/scratch
//
// For each vocabulary in tests/run/data (vocab-gpt2.gguf, vocab-llama3.gguf) and each
// pre-tokenizer name tessera supports, the file is copied with tokenizer.ggml.pre set to
// that name: the pre-tokenizer is chosen by that key alone, so one real vocabulary with
// several names exercises each name's splitting rules (digits, punctuation runs, newline
// runs, letters with a prefix, CJK runs) against merges that really occur. The ids of
// every case of tokenizer-corpus.txt go to tokenizer-refs-<vocab>.txt, one line per case.
//
// Cases: tokenizer-corpus.mjs (read as the test reads them).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { corpusCases, dataDir } from './tokenizer-corpus.mjs';

const scratch = process.argv[2];
if (!scratch) { console.error('usage: node gen-tokenizer-refs.mjs NPM_SCRATCH_DIR'); process.exit(2); }
const require = createRequire(path.join(path.resolve(scratch), 'package.json'));
const { getLlama } = await import(require.resolve('node-llama-cpp'));

const data = dataDir;
const cases = corpusCases();

// GGUF: rewrite the value of tokenizer.ggml.pre (a string after its key and type 8)
function withPre(buf, pre) {
    const key = Buffer.from('tokenizer.ggml.pre');
    const at = buf.indexOf(key);
    if (at < 0) throw new Error('no tokenizer.ggml.pre');
    const vstart = at + key.length + 4;
    const oldLen = Number(buf.readBigUInt64LE(vstart));
    const v = Buffer.from(pre);
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(v.length));
    return Buffer.concat([buf.subarray(0, vstart), len, v, buf.subarray(vstart + 8 + oldLen)]);
}

const PRES = ['default', 'gpt-2', 'llama-bpe', 'qwen2', 'smollm', 'deepseek-llm', 'falcon', 'starcoder'];
const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tsr-tokref-'));
for (const vocab of ['gpt2', 'llama3']) {
    const src = fs.readFileSync(path.join(data, `vocab-${vocab}.gguf`));
    let out = `# llama.cpp token ids (node-llama-cpp 3.21.1) of tokenizer-corpus.txt's ${cases.length} cases, vocab-${vocab}.gguf\n`;
    for (const pre of PRES) {
        const file = path.join(tmp, `${vocab}-${pre}.gguf`);
        fs.writeFileSync(file, withPre(src, pre));
        const model = await llama.loadModel({ modelPath: file, vocabOnly: true });
        // parse_special only where it changes something: the pre of the file as made
        for (const special of (pre === 'gpt-2' || pre === 'llama-bpe') ? [false, true] : [false]) {
            out += `pre ${pre} special ${special ? 1 : 0}\n`;
            for (const c of cases) out += model.tokenize(c, special).join(' ') + '\n';
        }
        await model.dispose();
        fs.rmSync(file);
    }
    fs.writeFileSync(path.join(data, `tokenizer-refs-${vocab}.txt`), out);
    console.log(`tokenizer-refs-${vocab}.txt: ${out.length} bytes`);
}
fs.rmSync(tmp, { recursive: true });
