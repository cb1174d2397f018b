// einsum: parse the equation (with "..."), take diagonals for labels repeated in one operand, sum
// out labels used by one operand only, then contract operands pairwise with bmm: each pair is
// permuted to (batch, kept-left, contracted) x (batch, contracted, kept-right).
#include <algorithm>
#include <cctype>
#include <map>
#include <string>

#include "kiln/ops/ops.h"

namespace kiln {
namespace {

struct Term {
  Tensor t;
  std::string labels;  // one char per dim
};

// Expands "..." into reserved labels \x01, \x02, ... (right-aligned across operands).
std::string expand_ellipsis(const std::string& term, int64_t ndim, int64_t ell_dims, const char* op) {
  auto p = term.find("...");
  if (p == std::string::npos) return term;
  int64_t n = ndim - static_cast<int64_t>(term.size() - 3);
  KILN_CHECK(n >= 0, Runtime, op, "einsum(): the number of subscripts in the equation (", term.size() - 3,
             ") is more than the number of dimensions (", ndim, ") for operand");
  std::string e;
  for (int64_t k = ell_dims - n; k < ell_dims; ++k) e += static_cast<char>(1 + k);
  return term.substr(0, p) + e + term.substr(p + 3);
}

// Diagonal for each repeated label.
Term take_diagonals(Term x) {
  for (size_t a = 0; a < x.labels.size(); ++a)
    for (size_t b = a + 1; b < x.labels.size();) {
      if (x.labels[a] == x.labels[b]) {
        KILN_CHECK(x.t.sizes()[a] == x.t.sizes()[b], Runtime, "einsum", "einsum(): subscript ", x.labels[a],
                   " is repeated for operand but the sizes don't match, ", x.t.sizes()[a], " != ", x.t.sizes()[b]);
        x.t = movedim(diagonal(x.t, 0, static_cast<int64_t>(a), static_cast<int64_t>(b)), {-1},
                      {static_cast<int64_t>(a)});
        x.labels.erase(b, 1);
      } else {
        ++b;
      }
    }
  return x;
}

// Sums out labels not in `keep`.
Term sum_out(Term x, const std::string& keep) {
  Shape dims;
  std::string rest;
  for (size_t i = 0; i < x.labels.size(); ++i) {
    if (keep.find(x.labels[i]) == std::string::npos) dims.push_back(static_cast<int64_t>(i));
    else rest += x.labels[i];
  }
  if (!dims.empty()) x.t = sum(x.t, dims);
  x.labels = rest;
  return x;
}

int64_t size_of(const Term& x, char c) { return x.t.sizes()[x.labels.find(c)]; }

// Contracts a and b over their shared labels not in `keep`; the result keeps a's then b's labels.
Term contract(const Term& a, const Term& b, const std::string& keep) {
  std::string batch, left, right, con;
  for (char c : a.labels) {
    bool in_b = b.labels.find(c) != std::string::npos, kept = keep.find(c) != std::string::npos;
    if (in_b && kept) batch += c;
    else if (in_b) con += c;
    else left += c;
  }
  for (char c : b.labels)
    if (a.labels.find(c) == std::string::npos) right += c;
  auto perm_of = [](const Term& x, const std::string& order) {
    Shape p;
    for (char c : order) p.push_back(static_cast<int64_t>(x.labels.find(c)));
    return p;
  };
  // broadcast size-1 batch / contracted dims between the operands
  Shape bs, cs;
  int64_t B = 1, L = 1, R = 1, C = 1;
  for (char c : batch) {
    int64_t s = std::max(size_of(a, c), size_of(b, c));
    bs.push_back(s);
    B *= s;
  }
  for (char c : con) {
    int64_t sa = size_of(a, c), sb = size_of(b, c);
    KILN_CHECK(sa == sb || sa == 1 || sb == 1, Runtime, "einsum", "einsum(): operands do not broadcast with "
               "remapped shapes (original->remapped)");
    cs.push_back(std::max(sa, sb));
    C *= std::max(sa, sb);
  }
  Shape ls, rs;
  for (char c : left) ls.push_back(size_of(a, c)), L *= size_of(a, c);
  for (char c : right) rs.push_back(size_of(b, c)), R *= size_of(b, c);
  Shape ea = bs, eb = bs;
  ea.insert(ea.end(), ls.begin(), ls.end());
  ea.insert(ea.end(), cs.begin(), cs.end());
  eb.insert(eb.end(), cs.begin(), cs.end());
  eb.insert(eb.end(), rs.begin(), rs.end());
  Tensor A = reshape(expand(permute(a.t, perm_of(a, batch + left + con)), ea), {B, L, C});
  Tensor Bm = reshape(expand(permute(b.t, perm_of(b, batch + con + right)), eb), {B, C, R});
  Shape out = bs;
  out.insert(out.end(), ls.begin(), ls.end());
  out.insert(out.end(), rs.begin(), rs.end());
  return {reshape(bmm(A, Bm), out), batch + left + right};
}

}  // namespace

Tensor einsum(const std::string& eq_in, const TensorList& ops) {
  std::string eq;
  for (char c : eq_in)
    if (c != ' ') eq += c;
  auto arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t s = 0;;) {
    size_t c = lhs.find(',', s);
    terms.push_back(lhs.substr(s, c == std::string::npos ? std::string::npos : c - s));
    if (c == std::string::npos) break;
    s = c + 1;
  }
  KILN_CHECK(terms.size() <= ops.size(), Runtime, "einsum", "einsum(): fewer operands were provided than specified "
             "in the equation (", terms.size(), " specified, ", ops.size(), " provided)");
  KILN_CHECK(terms.size() == ops.size(), Runtime, "einsum", "einsum(): more operands were provided than specified "
             "in the equation (", terms.size(), " specified, ", ops.size(), " provided)");
  int64_t ell = 0;
  for (size_t i = 0; i < terms.size(); ++i)
    if (terms[i].find("...") != std::string::npos)
      ell = std::max<int64_t>(ell, ops[i].dim() - static_cast<int64_t>(terms[i].size() - 3));
  std::vector<Term> xs;
  std::map<char, int> count;
  for (size_t i = 0; i < terms.size(); ++i) {
    for (char c : terms[i])
      KILN_CHECK(c == '.' || std::isalpha(static_cast<unsigned char>(c)), Runtime, "einsum",
                 "einsum(): invalid subscript given in the equation string: ", c);
    Term x{ops[i], expand_ellipsis(terms[i], ops[i].dim(), ell, "einsum")};
    KILN_CHECK(static_cast<int64_t>(x.labels.size()) == ops[i].dim(), Runtime, "einsum", "einsum(): the number of "
               "subscripts in the equation (", x.labels.size(), ") does not match the number of dimensions (",
               ops[i].dim(), ") for operand ", i, terms[i].find("...") == std::string::npos ? " and no ellipsis was given" : "");
    for (char c : x.labels) count[c]++;  // counted as written: "ii" sums, it does not keep i
    x = take_diagonals(x);
    xs.push_back(x);
  }
  std::string out;
  if (arrow != std::string::npos) {
    std::string r = eq.substr(arrow + 2);
    auto p = r.find("...");
    std::string e;
    for (int64_t k = 0; k < ell; ++k) e += static_cast<char>(1 + k);
    out = p == std::string::npos ? r : r.substr(0, p) + e + r.substr(p + 3);
    for (char c : out)
      KILN_CHECK(count.count(c), Runtime, "einsum", "einsum(): output subscript ", c,
                 " does not appear in the equation for any input operand");
  } else {
    for (int64_t k = 0; k < ell; ++k) out += static_cast<char>(1 + k);
    for (auto& [c, n] : count)
      if (n == 1 && c > 31) out += c;
  }
  // labels each operand still needs: the output's and those of the operands after it
  auto needed_after = [&](size_t i) {
    std::string keep = out;
    for (size_t j = i + 1; j < xs.size(); ++j) keep += xs[j].labels;
    return keep;
  };
  Term acc = sum_out(xs[0], xs.size() > 1 ? needed_after(0) + xs[1].labels : out);
  for (size_t i = 1; i < xs.size(); ++i) {
    Term b = sum_out(xs[i], needed_after(i) + acc.labels);
    acc = contract(acc, b, needed_after(i));
  }
  acc = sum_out(acc, out);
  // broadcast size-1 leftovers to the output shape and order the dims as the output asks
  Shape perm;
  for (char c : out) perm.push_back(static_cast<int64_t>(acc.labels.find(c)));
  return contiguous(permute(acc.t, perm));
}

}  // namespace kiln
