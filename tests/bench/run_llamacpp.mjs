// run_llamacpp.mjs: llama.cpp's prompt and generation speed on GGUF files, the other half of
// run_bench's side-by-side (not run by CI). run_bench --write-gguf DIR writes its random
// models (the same weights it times); then, with node-llama-cpp installed
// (npm i -E node-llama-cpp@3.21.1), from its folder:
//   UV_THREADPOOL_SIZE=1 node run_llamacpp.mjs [--prompt N (128)] [--gen N (16)] [--rounds N (3)] FILE...
// Settings as the issue's: CPU only (gpuLayers 0), 2 threads, context 1024, batch 512. The
// prompt is N random token ids in one evaluation; generation is greedy, token by token.
// Each file is timed in several rounds (a fresh sequence each) and the best kept, the
// shared-machine rule of the other benchmarks.
import {getLlama} from "node-llama-cpp";

const args = process.argv.slice(2);
const opt = {prompt: 128, gen: 16, rounds: 3};
const files = [];
for (let i = 0; i < args.length; ++i) {
    const k = args[i].replace(/^--/, "");
    if (args[i].startsWith("--") && k in opt && i + 1 < args.length) opt[k] = +args[++i];
    else files.push(args[i]);
}
if (!files.length) {
    console.error("usage: UV_THREADPOOL_SIZE=1 node run_llamacpp.mjs [--prompt N] [--gen N] [--rounds N] FILE...");
    process.exit(2);
}

const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const seconds = (t0) => Number(process.hrtime.bigint() - t0) / 1e9;

// one round: a fresh sequence, the prompt in one evaluation, then opt.gen greedy tokens
async function round(context, tokens) {
    const seq = context.getSequence();
    try {
        let t0 = process.hrtime.bigint();
        await seq.evaluateWithoutGeneratingNewTokens(tokens);
        const pp = seconds(t0);
        let n = 0;
        t0 = process.hrtime.bigint();
        for await (const tok of seq.evaluate([tokens[tokens.length - 1]], {temperature: 0})) {
            if (++n >= opt.gen || tok === undefined) break;
        }
        return {pp: tokens.length / pp, tg: n / seconds(t0)};
    } finally {
        seq.dispose();
    }
}

console.log(`llama.cpp (node-llama-cpp, CPU, 2 threads, context 1024, batch 512; prompt ${opt.prompt} tokens in one batch, ${opt.gen} generated; best of ${opt.rounds})\n`);
console.log("| file | prompt (tok/s) | generation (tok/s) |");
console.log("|---|---:|---:|");
for (const file of files) {
    const model = await llama.loadModel({modelPath: file, gpuLayers: 0});
    const context = await model.createContext({contextSize: 1024, batchSize: 512, threads: 2, sequences: 1});
    const nVocab = model.fileInsights.metadata?.tokenizer?.ggml?.tokens?.length ?? 32000;
    let seed = 7;
    const tokens = Array.from({length: opt.prompt}, () => (seed = (seed * 1103515245 + 12345) % 2147483648) % nVocab);
    let best = {pp: 0, tg: 0};
    for (let r = 0; r < opt.rounds; ++r) {
        const x = await round(context, tokens);
        best = {pp: Math.max(best.pp, x.pp), tg: Math.max(best.tg, x.tg)};
    }
    console.log(`| ${file.split("/").pop()} | ${best.pp.toFixed(2)} | ${best.tg.toFixed(2)} |`);
    await context.dispose();
    await model.dispose();
}
