# Data frames between R and Python, keeping missing values.

dp_columns_to_py <- function(data, columns = names(data)) {
  if (!is.data.frame(data)) {
    stop(dp_condition(paste0("data must be a data.frame, not ", class(data)[1]),
                      c("dpstats_ValueError", "dpstats_error", "error"), call = sys.call(-1)))
  }
  missing <- setdiff(columns, names(data))
  columns <- intersect(columns, names(data))
  out <- list()
  for (name in columns) {
    x <- data[[name]]
    if (is.factor(x)) {
      codes <- as.integer(x) - 1L
      codes[is.na(codes)] <- -1L
      out[[name]] <- list(type = "factor", codes = codes, levels = levels(x))
    } else if (is.integer(x) && !anyNA(x)) {
      # integers stay integers, so that C(x) names levels as Python does ("[T.1]", not "[T.1.0]")
      out[[name]] <- list(type = "int", values = x)
    } else if (is.logical(x) || is.numeric(x)) {
      out[[name]] <- list(type = "num", values = as.numeric(x))
    } else if (is.character(x)) {
      na <- is.na(x)
      x[na] <- ""
      out[[name]] <- list(type = "str", values = x, na = na)
    } else {
      stop(dp_condition(
        paste0("data: column '", name, "' has class ", class(x)[1],
               "; convert it to numeric, character or factor"),
        c("dpstats_ValueError", "dpstats_error", "error"), call = sys.call(-1)))
    }
  }
  list(columns = out, names = as.list(columns), nrow = nrow(data))
}

dp_columns_from_py <- function(x) {
  cols <- lapply(x$names, function(name) {
    col <- x$columns[[name]]
    if (identical(col$type, "factor")) {
      codes <- as.integer(unlist(col$codes)) + 1L  # Python's codes are 0-based, -1 for missing
      codes[codes < 1L] <- NA_integer_
      factor(unlist(col$levels)[codes], levels = unlist(col$levels))
    } else if (identical(col$type, "int")) {
      as.integer(unlist(col$values))
    } else if (identical(col$type, "num")) {
      v <- as.numeric(unlist(col$values))
      v[as.logical(unlist(col$na))] <- NA_real_
      v
    } else {
      v <- as.character(unlist(col$values))
      v[as.logical(unlist(col$na))] <- NA_character_
      v
    }
  })
  names(cols) <- unlist(x$names)
  if (!length(cols)) return(data.frame())
  df <- as.data.frame(cols, stringsAsFactors = FALSE, optional = TRUE)
  if (nrow(df) != x$nrow) df <- df[seq_len(x$nrow), , drop = FALSE]
  rownames(df) <- NULL
  df
}
