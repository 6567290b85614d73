/* qinglong panel: what the script editor needs beyond the panel itself -- a tokenizer for
 * syntax highlighting (Python, JavaScript, shell) and a line diff. Pure functions on strings;
 * the panel (panel.js) turns their results into text nodes, never markup.
 *
 * Hand-written, no build step, nothing fetched from elsewhere.
 */
(function () {
  "use strict";

  var KEYWORDS = {
    python: ("False None True and as assert async await break class continue def del elif " +
      "else except finally for from global if import in is lambda nonlocal not or pass raise " +
      "return try while with yield match case").split(" "),
    javascript: ("await break case catch class const continue debugger default delete do " +
      "else export extends false finally for function if import in instanceof let new null " +
      "of return super switch this throw true try typeof undefined var void while with " +
      "yield async").split(" "),
    shell: ("if then else elif fi case esac for while until do done in function select " +
      "time return exit export local readonly set unset shift break continue source " +
      "echo").split(" ")
  };

  var LANGUAGES = { ".py": "python", ".js": "javascript", ".mjs": "javascript",
    ".cjs": "javascript", ".sh": "shell" };

  /* The language a script's path implies ("" when none: no highlighting). */
  function languageOf(path, interpreter) {
    var byInterpreter = { python3: "python", node: "javascript", bash: "shell", sh: "shell" };
    if (interpreter && byInterpreter[interpreter]) return byInterpreter[interpreter];
    var dot = path.lastIndexOf(".");
    if (dot < 0 || dot < path.lastIndexOf("/")) return "";
    return LANGUAGES[path.slice(dot).toLowerCase()] || "";
  }

  /* The rules of a language, tried in order at each position: [class, sticky RegExp]. */
  function rules(language) {
    var comment = language === "javascript" ? /\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/y
      : /#[^\n]*/y;
    var strings = language === "python"
      ? /(?:[rRbBuUfF]{0,2})(?:'''[\s\S]*?(?:'''|$)|"""[\s\S]*?(?:"""|$)|'(?:\\.|[^'\\\n])*'?|"(?:\\.|[^"\\\n])*"?)/y
      : language === "javascript"
        ? /`(?:\\[\s\S]|[^`\\])*`?|'(?:\\.|[^'\\\n])*'?|"(?:\\.|[^"\\\n])*"?/y
        : /'[^']*'?|"(?:\\.|[^"\\])*"?/y;
    var found = [["comment", comment], ["string", strings],
      ["number", /\b(?:0[xX][0-9a-fA-F_]+|\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?)\b/y]];
    if (language === "shell") found.push(["variable", /\$\{[^}\n]*\}?|\$[A-Za-z_][A-Za-z_0-9]*|\$[0-9@*#?$!-]/y]);
    found.push(["word", /[A-Za-z_$][\w$]*/y]);
    return found;
  }

  /* The text cut into [class, text] pieces ("" for plain text); joined, they are the text. */
  function tokens(text, language) {
    if (!language) return [["", text]];
    var keywords = {};
    KEYWORDS[language].forEach(function (k) { keywords[k] = true; });
    var table = rules(language);
    var out = [];
    var plain = "";
    var at = 0;
    while (at < text.length) {
      var matched = null;
      for (var i = 0; i < table.length; i++) {
        var rule = table[i][1];
        rule.lastIndex = at;
        var m = rule.exec(text);
        if (m && m[0].length) { matched = [table[i][0], m[0]]; break; }
      }
      if (!matched) { plain += text.charAt(at); at += 1; continue; }
      var kind = matched[0];
      if (kind === "word") {
        if (!keywords[matched[1]]) { plain += matched[1]; at += matched[1].length; continue; }
        kind = "keyword";
      }
      if (plain) { out.push(["", plain]); plain = ""; }
      out.push([kind, matched[1]]);
      at += matched[1].length;
    }
    if (plain) out.push(["", plain]);
    return out;
  }

  var MAX_DIFF_CELLS = 4000000; // lines x lines the table may hold (about 16 MB)

  /* The line diff from a to b: [{op: " " | "-" | "+", text}], or null when too large to
     compute here (common lines at both ends are set aside first). */
  function lineDiff(a, b) {
    var x = a.split("\n");
    var y = b.split("\n");
    var head = 0;
    while (head < x.length && head < y.length && x[head] === y[head]) head++;
    var tail = 0;
    while (tail < x.length - head && tail < y.length - head &&
           x[x.length - 1 - tail] === y[y.length - 1 - tail]) tail++;
    var xs = x.slice(head, x.length - tail);
    var ys = y.slice(head, y.length - tail);
    var n = xs.length;
    var m = ys.length;
    if ((n + 1) * (m + 1) > MAX_DIFF_CELLS) return null;
    var width = m + 1;
    var lcs = new Uint32Array((n + 1) * width);
    for (var i = n - 1; i >= 0; i--) {
      for (var j = m - 1; j >= 0; j--) {
        lcs[i * width + j] = xs[i] === ys[j] ? lcs[(i + 1) * width + j + 1] + 1
          : Math.max(lcs[(i + 1) * width + j], lcs[i * width + j + 1]);
      }
    }
    var out = [];
    x.slice(0, head).forEach(function (t) { out.push({ op: " ", text: t }); });
    var p = 0;
    var q = 0;
    while (p < n || q < m) {
      if (p < n && q < m && xs[p] === ys[q]) { out.push({ op: " ", text: xs[p] }); p++; q++; }
      else if (p < n && (q >= m || lcs[(p + 1) * width + q] >= lcs[p * width + q + 1])) {
        out.push({ op: "-", text: xs[p] }); p++;
      } else { out.push({ op: "+", text: ys[q] }); q++; }
    }
    x.slice(x.length - tail).forEach(function (t) { out.push({ op: " ", text: t }); });
    return out;
  }

  window.QlEditor = { languageOf: languageOf, tokens: tokens, lineDiff: lineDiff };
})();
