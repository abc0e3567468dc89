// tokenizer-corpus.mjs - the cases of tests/run/data/tokenizer-corpus.txt, read as
// tests/run/tokenizer_test.cpp reads them: every line (a line starting with "@esc " is
// unescaped: \n \r \t \\ \uXXXX), then every run of 8 consecutive lines joined with "\n",
// which brings newline runs and multi-line code. Shared by gen-tokenizer-refs.mjs and
// gen-tokenizer-vocabs.mjs.
import fs from 'node:fs';
import path from 'node:path';

export const dataDir = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'tests', 'run', 'data');

export function unescapeLine(l) {
    if (!l.startsWith('@esc ')) return l;
    return l.slice(5).replace(/\\(u[0-9a-fA-F]{4}|.)/g, (_, e) =>
        e[0] === 'u' ? String.fromCharCode(parseInt(e.slice(1), 16)) : ({ n: '\n', r: '\r', t: '\t', '\\': '\\' })[e]);
}

export function corpusCases() {
    const lines = fs.readFileSync(path.join(dataDir, 'tokenizer-corpus.txt'), 'utf8').split('\n');
    lines.pop();  // the file ends with a newline
    const cases = lines.map(unescapeLine);
    for (let i = 0; i + 8 <= lines.length; i += 8) cases.push(cases.slice(i, i + 8).join('\n'));
    return cases;
}
