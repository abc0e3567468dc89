// load_llamacpp.mjs: llama.cpp's load of the same files, for load_bench's table (not run by CI).
// With node-llama-cpp installed (npm i -E node-llama-cpp@3.21.1), from its folder:
//   UV_THREADPOOL_SIZE=1 node load_llamacpp.mjs FILE...
// Each row is a fresh node process (mmap / read, cold / warm: cold evicts the file's pages
// with posix_fadvise through python3). Columns as load_bench's; "node base" is the anonymous
// RSS of node itself before the load, to subtract.
import {getLlama} from "node-llama-cpp";
import {execFileSync} from "node:child_process";
import fs from "node:fs";

const status = (f) => {
    const m = fs.readFileSync("/proc/self/status", "utf8").match(new RegExp("^" + f + ":\\s+(\\d+)", "m"));
    return m ? +m[1] / 1024 : -1;
};

if (process.argv[2] === "--child") {
    const [file, mode] = process.argv.slice(3);
    const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
    const baseAnon = status("RssAnon");
    const t0 = process.hrtime.bigint();
    const model = await llama.loadModel({modelPath: file, useMmap: mode === "mmap", gpuLayers: 0});
    const t = Number(process.hrtime.bigint() - t0) / 1e9;
    console.log(JSON.stringify({t, hwm: status("VmHWM"), anon: status("RssAnon"), baseAnon}));
    await model.dispose();
    process.exit(0);
}

const evict = (file) => execFileSync("python3", ["-c",
    "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)", file]);
const warm = (file) => execFileSync("sh", ["-c", 'cat "$1" > /dev/null', "sh", file]);
console.log("| file | size MiB | mode | cache | load s | peak RSS MiB (VmHWM) | anon RSS MiB (RssAnon) | node base anon MiB | anon - base / file |");
console.log("|---|---:|---|---|---:|---:|---:|---:|---:|");
for (const file of process.argv.slice(2)) {
    const size = fs.statSync(file).size / 1048576;
    for (const mode of ["mmap", "read"]) {
        for (const cache of ["cold (fadvise)", "warm"]) {
            if (cache === "warm") warm(file); else evict(file);
            const r = JSON.parse(execFileSync(process.execPath, [process.argv[1], "--child", file, mode], {encoding: "utf8"}).trim().split("\n").pop());
            console.log(`| ${file.split("/").pop()} | ${size.toFixed(1)} | ${mode} | ${cache} | ${r.t.toFixed(3)} | ${r.hwm.toFixed(1)} | ${r.anon.toFixed(1)} | ${r.baseAnon.toFixed(1)} | ${(100 * (r.anon - r.baseAnon) / size).toFixed(1)} % |`);
        }
    }
}
