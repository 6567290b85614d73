/* qinglong panel: the Account page -- the user's second factor (TOTP). Loaded after panel.js;
 * uses its helpers (window.QL) and registers its page in QL.pages.
 *
 * The state comes from GET /api/v1/session (second_factor: enabled, pending, required): off
 * shows "Set up"; set-up shows the secret and the otpauth:// URI as text, once, and asks for
 * a code; turned on, the recovery codes are listed once; on, a current code or a recovery
 * code turns it off after a confirmation beside the button. As everywhere in the panel,
 * every value from the API reaches the page as text.
 */
(function () {
  "use strict";

  var QL = window.QL;
  var el = QL.el, $ = QL.$;
  var MINE = "/account/second-factor";

  function part(id, shown) { $(id).hidden = !shown; }

  function describeState(state) {
    if (state.enabled) {
      return "On: logging in asks for a code. Recovery codes left: " +
        state.recovery_codes_left + ".";
    }
    if (state.pending) return "Being set up: confirm it with a code from the app.";
    return "Off: logging in asks for the password only.";
  }

  function accountPage() {
    var keep = { secret: null, uri: null }; // the pending secret, while this page shows it

    function render(who) {
      var state = who.second_factor;
      QL.showProblem("problem", null);
      if (!state) { // a token or the CLI: nothing to change here
        $("second-state").textContent = "";
        part("second-session-only", true);
        return;
      }
      $("second-state").textContent = describeState(state);
      part("second-required", state.required && !state.enabled);
      part("second-off-part", !state.enabled && !keep.secret);
      part("second-pending-part", !state.enabled && !!keep.secret);
      part("second-on-part", state.enabled);
      if (keep.secret) {
        $("second-secret").textContent = keep.secret;
        $("second-uri").textContent = keep.uri;
      }
    }

    function load() {
      return QL.api("GET", "/session").then(render).catch(function (e) {
        QL.showProblem("problem", e);
      });
    }

    $("second-begin").addEventListener("click", function () {
      var button = $("second-begin");
      button.disabled = true;
      QL.showProblem("second-begin-problem", null);
      QL.api("POST", MINE).then(function (started) {
        keep.secret = started.secret;
        keep.uri = started.otpauth_uri;
        part("second-codes-part", false);
        return load().then(function () { $("second-confirm-otp").focus(); });
      }).catch(function (e) {
        QL.showProblem("second-begin-problem", e);
      }).then(function () { button.disabled = false; });
    });

    $("second-confirm").addEventListener("submit", function (event) {
      event.preventDefault();
      var button = $("second-confirm-submit");
      button.disabled = true;
      QL.showProblem("second-confirm-problem", null);
      QL.api("POST", MINE + "/confirm", { otp: $("second-confirm-otp").value.trim() })
        .then(function (turnedOn) {
          keep.secret = keep.uri = null; // shown once: gone from the page now
          $("second-secret").textContent = "";
          $("second-uri").textContent = "";
          $("second-confirm-otp").value = "";
          var list = QL.clear($("second-codes"));
          turnedOn.recovery_codes.forEach(function (code) {
            list.appendChild(el("li", null, el("code", null, code)));
          });
          part("second-codes-part", true);
          return load();
        }).catch(function (e) {
          QL.showProblem("second-confirm-problem", e);
        }).then(function () { button.disabled = false; });
    });

    $("second-off").addEventListener("submit", function (event) {
      event.preventDefault();
      var button = $("second-off-submit");
      var otp = $("second-off-otp").value.trim();
      var recovery = $("second-off-recovery").value.trim();
      QL.showProblem("second-off-problem", null);
      QL.confirmBeside(button, "Turn the second factor off?", "Turn off", function () {
        var body = otp ? { otp: otp } : { recovery_code: recovery };
        return QL.api("DELETE", MINE, body).then(function () {
          $("second-off-otp").value = "";
          $("second-off-recovery").value = "";
          part("second-codes-part", false);
          return load();
        }).catch(function (e) { QL.showProblem("second-off-problem", e); });
      });
    });

    load();
  }

  QL.pages.account = accountPage;
})();
