#!/usr/bin/env python3
"""Writes tests/data/tokenizer/corpus.jsonl: the strings the real-tokenizer fixtures encode.

Issue 39 item 2: at least 2000 strings of code, CJK, emoji, combining marks, whitespace runs,
inline special tokens and digits. Deterministic (fixed seed, no input), standard library only:

    python3 tools/tokenizer_corpus.py > tests/data/tokenizer/corpus.jsonl

One JSON object a line, {"kind": ..., "text": ...}, ASCII-escaped so that no reader splits a
line at U+0085 or U+2028. Random characters come from blocks assigned by Unicode 10, so that
the Unicode versions of PCRE2 (14), utf8proc (13), Oniguruma and V8 agree on them.
"""
import json
import random
import sys
import unicodedata

rng = random.Random(39)
out = []


def add(kind, text):
    out.append({"kind": kind, "text": text})


# --- code ---------------------------------------------------------------------------------------
CODE_LINES = [
    "def forward(self, x: torch.Tensor) -> torch.Tensor:",
    "    return self.proj(x) * self.scale",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "#include <vector>",
    "std::vector<int32_t> ids{1, 2, 3};",
    "const auto& [key, value] = *it;",
    "if (rc != 0 && errno == EINTR) continue;",
    "fn main() { println!(\"{}\", x); }",
    "let v: Vec<u8> = s.bytes().collect();",
    "func (s *Server) Serve(l net.Listener) error {",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "x = [i ** 2 for i in range(10) if i % 2 == 0]",
    "print(f\"{name!r:>10} = {value:.3f}\")",
    "console.log(`total: ${a + b}`);",
    "const f = async (x) => await fetch(x).then(r => r.json());",
    "<div class=\"row\"><span id='a'>&amp;&lt;&gt;</span></div>",
    "{\"model\": \"qwen3\", \"max_tokens\": 128, \"stream\": true}",
    "git commit -m \"fix: don't split UTF-8\" -- src/a.cpp",
    "cat /etc/hosts | grep -v '^#' | awk '{print $1}'",
    "$ cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && make -j8",
    "matrix[i][j] += alpha * (lhs[i][k] * rhs[k][j]);",
    "public static void main(String[] args) throws IOException {",
    "    @Override",
    "return x<<3 | y>>>2 ^ ~z;",
    "a != b && c == d || !e",
    "// TODO(someone): remove this hack",
    "/* multi-line\n   comment */",
    "    \"\"\"Docstring with 'quotes' and \\\"escapes\\\".\"\"\"",
    "else if (ptr == nullptr) { throw std::runtime_error(\"null\"); }",
    "\t\tcase 0x1F: return '\\x1f';",
    "import numpy as np; np.allclose(a, b, atol=1e-6)",
    "try:\n    pass\nexcept (ValueError, KeyError) as e:\n    raise",
    "    self.hidden_size = config.hidden_size",
    "::std::unique_ptr<Foo>&& bar = std::move(baz);",
    "regex = r\"(?i:'s|'t|'re)|\\p{L}+\"",
    "%define api.pure full",
    "x+=1;y-=2;z*=3;w/=4;",
    "#!/usr/bin/env bash\nset -euo pipefail",
    "END_OF_LINE = \"\\r\\n\"",
    "0xDEADBEEF, 0b1010, 0o777, 1_000_000, 3.14e-10",
]
INDENTS = ["", "  ", "    ", "        ", "\t", "\t\t", "   "]
for i in range(330):
    k = rng.randint(1, 4)
    lines = [rng.choice(INDENTS) + rng.choice(CODE_LINES) for _ in range(k)]
    sep = rng.choice(["\n", "\n", "\n\n", "\r\n", "\n    \n"])
    add("code", sep.join(lines) + rng.choice(["", "\n", "  ", "\n\n"]))

# --- CJK --------------------------------------------------------------------------------------------
CJK = [
    "你好，世界！今天天气很好。",
    "机器学习模型的推理速度取决于显存带宽。",
    "我们在北京大学读书，研究自然语言处理。",
    "大语言模型（LLM）可以生成代码、翻译文本。",
    "中华人民共和国成立于1949年10月1日。",
    "「引号」『书名号』《标题》〈副标题〉",
    "東京は日本の首都です。",
    "今日はいい天気ですね、散歩しましょう。",
    "カタカナとひらがなと漢字を混ぜた文章",
    "ｶﾀｶﾅ（半角）とカタカナ（全角）",
    "안녕하세요, 만나서 반갑습니다.",
    "한국어 문장에는 띄어쓰기가 있습니다.",
    "繁體中文與简体中文並存。",
    "这是一个测试：ABC123，还有emoji😀。",
    "数据库（database）里有１２３４条记录。",
    "第三章　量子力学の基礎",
    "北京市海淀区中关村大街27号",
    "一二三四五六七八九十百千万亿",
    "ㄅㄆㄇㄈ注音符号",
    "漢字・かな・カナ・ABC・123",
]
for i in range(260):
    parts = rng.sample(CJK, rng.randint(1, 3))
    glue = rng.choice(["", " ", "\n", "，", " and ", "　"])
    add("cjk", glue.join(parts))

# --- emoji ------------------------------------------------------------------------------------------
EMOJI = [
    "😀", "😂", "🥲", "❤️", "👍", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸", "🇨🇳", "🇯🇵",
    "#️⃣", "1️⃣", "✅", "❌", "🚀", "🔥", "🎉", "🤖", "🧑🏿‍🔬", "🫠", "☕", "⌚", "✌️",
    "🇪🇺", "🏴‍☠️", "👁️‍🗨️", "🙋‍♀️", "🤝🏻", "💯", "🐍", "🦀", "➡️", "©️", "™",
]
WORDS = ["hello", "ship it", "great job", "so", "wow", "launch", "coffee", "bug", "fixed", "LGTM"]
for i in range(230):
    items = []
    for _ in range(rng.randint(1, 6)):
        items.append(rng.choice(EMOJI) if rng.random() < 0.6 else rng.choice(WORDS))
    add("emoji", rng.choice(["", " "]).join(items) if rng.random() < 0.5 else " ".join(items))

# --- combining marks --------------------------------------------------------------------------------
COMBINING = [
    "e\u0301", "a\u0308", "o\u0302\u0301", "n\u0303", "c\u0327", "u\u031b\u0300",
    "A\u030a", "\u212b", "\u212a", "\u2126", "i\u0307\u0301", "a\u0308\u0301", "x\u0301",
    "q\u0323\u0307", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab", "Z\u0337\u0338\u0335",
]
NFD_WORDS = ["café", "naïve", "Ångström", "résumé", "Việt Nam", "Đà Nẵng", "São Paulo",
             "Ελληνικά", "Ŕêşũľţ", "ḍḥṭṣ", "Dvořák", "Zürich", "Málaga", "Øresund", "façade"]
SCRIPTS = ["नमस्ते दुनिया", "हिन्दी भाषा", "สวัสดีครับ", "ภาษาไทย", "مَرْحَبًا بِالْعَالَم",
           "العربية", "שָׁלוֹם עוֹלָם", "עברית", "বাংলা ভাষা", "தமிழ் மொழி", "각", "Ǆemal ǅ",
           "ﬁnancial ﬂow", "Ⅻ ⅻ", "ſtraße STRASSE"]
for i in range(120):
    s = " ".join(rng.choice(COMBINING) + rng.choice(["", "bc", " ", "Z"]) for _ in range(rng.randint(1, 5)))
    add("combining", s)
for i in range(60):
    w = rng.choice(NFD_WORDS)
    form = rng.choice(["NFD", "NFC", "NFKD"])
    add("combining", unicodedata.normalize(form, w) + rng.choice(["", " ", ".", "\n"]) + rng.choice(NFD_WORDS))
for i in range(60):
    add("combining", rng.choice(SCRIPTS) + rng.choice([" ", "", ", "]) + rng.choice(SCRIPTS))
for i in range(30):  # zalgo: long runs of marks on one base
    base = rng.choice("aeiouxyzAEZ")
    marks = "".join(chr(rng.randint(0x300, 0x36F)) for _ in range(rng.randint(2, 20)))
    add("combining", base + marks + rng.choice(["", " text", "!", base]))

# --- whitespace runs --------------------------------------------------------------------------------
WS = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2003", "\u0085", "\u2028",
      "\u2029", "\u000b", "\u000c", "\ufeff", "\u200b", "\u1680", "\u202f", "\u205f", "\u180e"]
for i in range(230):
    parts = []
    for _ in range(rng.randint(1, 5)):
        run = "".join(rng.choice(WS) for _ in range(rng.randint(1, 4))) * rng.randint(1, 6)
        parts.append(run)
        parts.append(rng.choice(["word", "x", "1", "!", "汉字", "é", "", "foo bar"]))
    add("whitespace", "".join(parts))
for n in [1, 2, 3, 7, 8, 15, 16, 31, 32, 64, 100, 257]:
    add("whitespace", " " * n)
    add("whitespace", "a" + " " * n + "b")
    add("whitespace", "\n" * (n % 20 + 1) + "x")
add("whitespace", "")
add("whitespace", " " * 2000 + "end")
add("whitespace", "\t" * 300)

# --- inline special tokens --------------------------------------------------------------------------
SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
           "</tool_call>", "<tool_response>", "</tool_response>", "<|vision_start|>",
           "<|image_pad|>", "<|vision_end|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
           "<|box_start|>", "<|quad_end|>"]
NEAR = ["<|im_start", "im_end|>", "<|IM_START|>", "<think", "think>", "< think>", "<|endoftext|",
        "<<|im_end|>>", "<|im_start|im_end|>", "</ think>"]
ROLES = ["user", "assistant", "system", "tool"]
for i in range(120):
    role = rng.choice(ROLES)
    body = rng.choice(CJK + WORDS + CODE_LINES[:10] + ["", " ", "\n"])
    s = "<|im_start|>" + role + "\n" + body + "<|im_end|>" + rng.choice(["\n", "", "\n\n"])
    if rng.random() < 0.4:
        s += "<|im_start|>assistant\n<think>\n" + rng.choice(["", "\n", "Let me think."]) + "\n</think>\n\n"
    add("special", s)
for i in range(110):
    parts = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        parts.append(rng.choice(SPECIAL) if r < 0.5 else rng.choice(NEAR) if r < 0.7 else rng.choice(WORDS + [" ", "  ", "\n", "é", "汉"]))
    add("special", "".join(parts))

# --- digits -----------------------------------------------------------------------------------------
for i in range(120):
    n = rng.randint(0, 10 ** rng.randint(1, 25))
    fmt = rng.choice(["{}", "{:,}", "-{}", "{}.{}", "${:,}", "{}%", "v{}.{}.{}", "{}e-{}", "0x{:x}"])
    try:
        s = fmt.format(n, rng.randint(0, 999), rng.randint(0, 99))
    except (IndexError, ValueError):
        s = str(n)
    add("digits", s + rng.choice(["", " items", "\n", "年", "kg"]))
DIGIT_MISC = ["１２３４５", "٠١٢٣٤٥٦٧٨٩", "०१२३४५", "x² + y³ = z⁴", "½ ¼ ¾", "①②③", "Ⅳ Ⅸ",
              "2026-12-07T15:45:56Z", "+1 (555) 012-3456", "3.14159265358979323846",
              "192.168.0.1:8080", "1e10 1E-5 .5 5.", "₀₁₂₃", "١٢٣ and 456", "𝟘𝟙𝟚𝟛"]
for i in range(90):
    add("digits", rng.choice(DIGIT_MISC) + rng.choice(["", " ", "7", "a1b2c3"]) + rng.choice(DIGIT_MISC))

# --- contractions and case --------------------------------------------------------------------------
CONTR = ["I'm", "you're", "it's", "don't", "we'll", "they've", "he'd", "YOU'RE", "IT'S", "We'LL",
         "'s", "'S", "'t", "'re", "rock'n'roll", "o'clock", "'ſ", "l'été", "'Ll", "''s"]
for i in range(90):
    add("contractions", " ".join(rng.choice(CONTR) for _ in range(rng.randint(1, 5))))

# --- prose ------------------------------------------------------------------------------------------
PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "Le cœur a ses raisons que la raison ne connaît point.",
    "Übermäßig große Straßen führen zu Staus.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Τάχιστη αλώπηξ βαφής ψημένη γη, δρασκελίζει υπέρ νωθρού κυνός.",
    "¿Dónde está la biblioteca? ¡Aquí!",
    "Hello, World! How are you doing today?",
    "It was the best of times, it was the worst of times.",
    "E = mc² — Einstein (1905)…",
    "“Smart quotes” and ‘single ones’ – dashes — ellipses…",
]
for i in range(150):
    add("prose", rng.choice(["", " "]) + " ".join(rng.sample(PROSE, rng.randint(1, 3))))

# --- random characters ------------------------------------------------------------------------------
RANGES = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF),
          (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F),
          (0x2190, 0x23FF), (0x2500, 0x27BF), (0x3000, 0x30FF), (0x4E00, 0x9FA5), (0xAC00, 0xD7A3),
          (0xFF00, 0xFFEF), (0x1F300, 0x1F64F), (0x0, 0x1F), (0x300, 0x36F)]
for i in range(420):
    chars = []
    for _ in range(rng.randint(1, 40)):
        lo, hi = rng.choice(RANGES)
        c = chr(rng.randint(lo, hi))
        if unicodedata.category(c) in ("Cn", "Cs"):
            continue
        chars.append(c)
    add("random", "".join(chars))

assert len(out) >= 2000, len(out)
for row in out:
    sys.stdout.write(json.dumps(row, ensure_ascii=True) + "\n")
