#include "net/forward_cursor.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "shm/mapping_guard.h"

namespace tether::net {

// The file's whole content; `next` is the only field that changes after
// Open. Torn or foreign contents fail the magic or incarnation check and
// are started afresh.
struct ForwardCursor::File {
  uint64_t magic;
  uint64_t incarnation;
  // Queue index of the next message to handle (kNoPosition in a file an
  // older build left: no position).
  std::atomic<uint64_t> next;
  // The stream (Stream); absent (kStreamlessSize) in files of older builds.
  uint64_t stream;
  std::atomic<uint64_t> last_seq;
  std::atomic<uint64_t> lost;
};

namespace {

constexpr uint64_t kMagic = 0x5255434e'54454e54ull;  // "TNETNCUR"
// `next` as builds before `start` left it when no run had handled a message.
constexpr uint64_t kNoPosition = ~uint64_t{0};

absl::Status Errno(int err, const std::string& what, const std::string& path) {
  const std::string text =
      absl::StrCat("cannot ", what, " the net bridge's forwarding cursor ",
                   path, ": ", std::strerror(err));
  if (err == EACCES || err == EPERM) {
    return absl::PermissionDeniedError(absl::StrCat(
        text, " (run the bridge as the user that owns the instance folder)"));
  }
  if (err == ENOSPC) {
    return absl::ResourceExhaustedError(
        absl::StrCat(text, " (the shared-memory filesystem is full)"));
  }
  return absl::InternalError(text);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ForwardCursor>> ForwardCursor::Open(
    const shm::ChannelOptions& options, const std::string& channel,
    const std::string& bridge, uint64_t incarnation, uint64_t start,
    const Stream* keep) {
  static_assert(offsetof(File, next) == kPositionOffset);
  static_assert(offsetof(File, stream) == kStreamlessSize);
  const std::string path =
      shm::Channel::CompanionPathFor(options, channel, kKind, bridge);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                        0600);
  const auto not_a_file = [&] {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is not a regular file: remove it (the net bridge keeps its "
              "forwarding cursor there)"));
  };
  if (fd < 0) {
    if (errno == EISDIR || errno == ELOOP) return not_a_file();
    return Errno(errno, "open", path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return not_a_file();
  }
  // One bridge per file: a second one would write the same stream's
  // numbers, and a receiver would drop its frames as duplicates.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the net bridge's forwarding cursor ", path,
          " is in use by another process (a bridge of the same name on this "
          "instance): run one bridge per name"));
    }
    return Errno(err, "lock", path);
  }
  const bool sized = static_cast<size_t>(st.st_size) >= sizeof(File);
  // An older build's file: its position is good, its stream is new.
  const bool streamless =
      static_cast<size_t>(st.st_size) == kStreamlessSize;
  // Reserve the page before mapping it: a full filesystem fails here, not
  // with a SIGBUS at the first store.
  if (!sized) {
    if (const int rc = ::posix_fallocate(fd, 0, sizeof(File)); rc != 0) {
      ::close(fd);
      return Errno(rc, "size", path);
    }
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* map = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  if (map == MAP_FAILED) {
    ::close(fd);
    return Errno(map_errno, "map", path);
  }
  // Truncated under us, the page would SIGBUS at the next store.
  const int guard = shm::internal::RegisterMapping(map, page);
  File* file = static_cast<File*>(map);
  std::string afresh;
  const bool has_position = sized || streamless;
  if (static_cast<size_t>(st.st_size) >= kStreamlessSize &&
      file->magic != kMagic) {
    afresh = "it was not a cursor (damaged, or another program's)";
  } else if (st.st_size > 0 && !has_position) {
    afresh = absl::StrCat("it was cut short (", st.st_size, " bytes)");
  } else if (has_position && file->incarnation != incarnation) {
    afresh = "it was of another incarnation of the channel (re-created "
             "since), whose messages are gone";
  }
  const bool fresh = !has_position || !afresh.empty();
  if (fresh) {
    file->magic = 0;  // a reader of a half-written file sees no cursor
    file->incarnation = incarnation;
    file->next.store(start, std::memory_order_relaxed);
  } else if (file->next.load(std::memory_order_relaxed) == kNoPosition) {
    file->next.store(start, std::memory_order_relaxed);
  }
  // No stream yet: a new file, one of an older build (the words past its
  // end read as zero), or one killed while it was being given a stream.
  if (fresh || file->stream == 0 || keep != nullptr) {
    Stream s;
    if (keep != nullptr) {
      s = *keep;
    } else {
      std::random_device rd;
      s.id = ((uint64_t{rd()} << 32) ^ rd()) | 1;  // never 0
    }
    // The id last: a kill before it leaves a file with no stream, which
    // the next Open() gives one (the position is kept either way).
    file->stream = 0;
    file->last_seq.store(s.last_seq, std::memory_order_relaxed);
    file->lost.store(s.lost, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    file->stream = s.id;
  }
  file->magic = kMagic;
  std::unique_ptr<ForwardCursor> cursor(
      new ForwardCursor(path, fd, file, guard, std::move(afresh)));
  cursor->position_ = file->next.load(std::memory_order_relaxed);
  cursor->stream_ = {file->stream,
                     file->last_seq.load(std::memory_order_relaxed),
                     file->lost.load(std::memory_order_relaxed)};
  return cursor;
}

std::string ForwardCursor::Gone() const {
  struct stat mine, there;
  if (::fstat(fd_, &mine) != 0) return "cannot be checked";
  if (::stat(path_.c_str(), &there) != 0) return "was removed";
  if (there.st_dev != mine.st_dev || there.st_ino != mine.st_ino) {
    return "was replaced by another file";
  }
  if (static_cast<size_t>(mine.st_size) < sizeof(File)) {
    return absl::StrCat("was cut short to ", mine.st_size, " bytes");
  }
  return "";
}

bool ForwardCursor::damaged() const {
  return guard_ >= 0 && shm::internal::MappingDamaged(guard_);
}

ForwardCursor::~ForwardCursor() {
  if (guard_ >= 0) shm::internal::UnregisterMapping(guard_);
  ::munmap(file_, static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
  ::close(fd_);  // and the lock with it
}

std::optional<uint64_t> ForwardCursor::Resume(uint64_t first) {
  const uint64_t next = file_->next.load(std::memory_order_relaxed);
  if (next == kNoPosition || next > first) return std::nullopt;
  const uint64_t gap = first - next;
  // The count before the position: killed between the two, the next run
  // counts the gap twice, never not at all.
  stream_.lost += gap;
  position_ = first;
  file_->lost.store(stream_.lost, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  file_->next.store(first, std::memory_order_relaxed);
  return gap;
}

void ForwardCursor::Advance(uint64_t index) {
  position_ = index + 1;
  file_->next.store(index + 1, std::memory_order_relaxed);
}

void ForwardCursor::Record(uint64_t seq, uint64_t lost, uint64_t index) {
  stream_.last_seq = seq;
  stream_.lost = lost;
  position_ = index;
  // In this order, not reordered by the compiler (a SIGKILL can land
  // between any two): a kill counts more, never less.
  file_->lost.store(lost, std::memory_order_relaxed);
  file_->last_seq.store(seq, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  file_->next.store(index, std::memory_order_relaxed);
}

}  // namespace tether::net
