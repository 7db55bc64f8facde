"""Two spaces, one prefill (issue 50): train the query side of a TwoSpacesEncoder on cached document halves."""
