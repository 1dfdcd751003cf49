# R formulas to dpstats' (patsy) formula strings.

.dp_functions <- c(
  log = "log", exp = "exp", sqrt = "sqrt", abs = "abs",
  log10 = "np.log10", log2 = "np.log2", log1p = "np.log1p", expm1 = "np.expm1"
)
.dp_binary <- c("+", "-", "*", "/", ":", "^")

dp_unsupported <- function(what, formula) {
  stop(dp_condition(
    paste0("formula: ", what, " has no dpstats translation in ", paste(deparse(formula), collapse = " "),
           "; give the formula as a string in dpstats (patsy) syntax instead"),
    c("dpstats_ValueError", "dpstats_error", "error"), call = NULL))
}

dp_deparse_term <- function(e, formula, inside_I = FALSE) {
  rec <- function(x, I = inside_I) dp_deparse_term(x, formula, I)
  if (is.symbol(e)) {
    name <- as.character(e)
    if (identical(name, ".")) dp_unsupported("'.' (all other columns)", formula)
    if (!grepl("^[A-Za-z_][A-Za-z0-9_]*$", name)) return(paste0("Q(\"", name, "\")"))
    return(name)
  }
  if (is.numeric(e) || is.logical(e)) return(format(e, digits = 15))
  if (!is.call(e)) dp_unsupported(paste0("'", paste(deparse(e), collapse = ""), "'"), formula)
  fn <- as.character(e[[1]])
  args <- as.list(e)[-1]
  if (fn == "(") return(paste0("(", rec(args[[1]]), ")"))
  if (fn %in% .dp_binary) {
    op <- if (fn == "^") "**" else fn
    if (length(args) == 1) return(paste0(op, rec(args[[1]])))
    sep <- if (op == ":") ":" else paste0(" ", op, " ")
    return(paste0(rec(args[[1]]), sep, rec(args[[2]])))
  }
  if (fn == "I") return(paste0("I(", rec(args[[1]], TRUE), ")"))
  if (fn %in% c("factor", "as.factor")) {
    if (length(args) != 1) dp_unsupported(paste0(fn, "() with arguments"), formula)
    return(paste0("C(", rec(args[[1]]), ")"))
  }
  if (fn %in% names(.dp_functions)) {
    if (length(args) != 1) dp_unsupported(paste0(fn, "() with more than one argument"), formula)
    return(paste0(.dp_functions[[fn]], "(", rec(args[[1]]), ")"))
  }
  dp_unsupported(paste0("the function ", fn, "()"), formula)
}

#' Translate an R formula to dpstats' formula syntax
#'
#' dpstats builds designs with patsy, whose formulas are those of Python's
#' statsmodels. This translates the common R forms: \code{factor(x)} to
#' \code{C(x)}, \code{I(x^2)} to \code{I(x ** 2)}, \code{log10(x)} to
#' \code{np.log10(x)}; \code{log}, \code{exp}, \code{sqrt}, \code{abs},
#' \code{a*b}, \code{a:b}, \code{- 1} and \code{+ 0} are the same in both.
#'
#' @param formula A two-sided R formula, or a character string already in
#'   dpstats (patsy) syntax, which is returned unchanged.
#' @return A character string.
#' @section Errors:
#' Formulas using \code{.}, \code{poly()}, \code{offset()}, \code{\%in\%} or
#' other functions raise an error of class \code{dpstats_error}; give such a
#' model as a patsy string instead.
#' @examples
#' dp_formula(log(wage) ~ educ + I(exper^2) + factor(region))
#' dp_formula(y ~ a * b - 1)
#' @export
dp_formula <- function(formula) {
  if (is.character(formula) && length(formula) == 1L) {
    if (!grepl("~", formula, fixed = TRUE)) {
      stop(dp_condition(paste0("formula must be 'outcome ~ regressors', got \"", formula, "\""),
                        c("dpstats_ValueError", "dpstats_error", "error"), call = NULL))
    }
    return(formula)
  }
  if (!inherits(formula, "formula") || length(formula) != 3L) {
    stop(dp_condition("formula must be a two-sided formula such as lwage ~ educ + exper, or a string",
                      c("dpstats_ValueError", "dpstats_error", "error"), call = NULL))
  }
  paste(dp_deparse_term(formula[[2]], formula), "~", dp_deparse_term(formula[[3]], formula))
}

# An R-style coefficient name (factor(x)level, I(x^2)) in dpstats' naming.
dp_coef_name <- function(coef) {
  m <- regmatches(coef, regexec("^(?:as\\.)?factor\\(([^()]+)\\)(.+)$", coef, perl = TRUE))[[1]]
  if (length(m) == 3L) return(paste0("C(", m[2], ")[T.", m[3], "]"))
  if (grepl("^I\\(", coef)) {
    e <- tryCatch(str2lang(coef), error = function(err) NULL)
    if (!is.null(e)) return(dp_deparse_term(e, stats::as.formula(paste("y ~", coef))))
  }
  coef
}
